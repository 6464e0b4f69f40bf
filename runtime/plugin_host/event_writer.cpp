// SPDX-License-Identifier: MIT
// The writer thread (event_writer.h): stream, spool and recorder.
#include "runtime/plugin_host/event_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/c_api_internal.h"
#include "runtime/engine.h"
#include "runtime/log.h"
#include "runtime/thread_control.h"

namespace ftjit::plugins::detail {

namespace {

// Short enough that a default ring rarely fills between two visits on a
// busy thread (it also wakes the writer when half full), long enough to
// cost nothing when idle.
constexpr uint64_t kWriterPeriodNs = 2'000'000;
constexpr auto kNameRefreshPeriod = std::chrono::seconds(1);

// A spool chunk: this many events of block `block` of instance `instance`
// follow, in commit order.
struct ChunkHeader {
  uint32_t instance;
  uint32_t block;
  uint64_t events;
};
static_assert(sizeof(ChunkHeader) % 8 == 0, "events after a header stay 8-byte aligned");

// An unlinked file in $TMPDIR (or /tmp); memory when no directory takes
// one. -1 when neither can be had.
int open_spool() {
  const char* dir = std::getenv("TMPDIR");
  if (dir == nullptr || *dir == '\0') dir = "/tmp";
  int fd = ::open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fd = ::memfd_create("ftjit-spool", MFD_CLOEXEC);
  return fd;
}

void refresh_names(Instance& inst) {
  for (ThreadBlock* b = inst.threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    refresh_thread_name(b);
  }
}

// What consume() is told of the thread of `b`.
struct ThreadInfo {
  explicit ThreadInfo(const ThreadBlock* b) : info{b->tid, name, b->drops.load(std::memory_order_relaxed)} {
    b->copy_name(name);
  }
  char name[16];
  ftjit_thread_info info;
};

// `n` consecutive events of the thread of `b`, `b->event_size` apart, to the
// plugin: one consume_run() when it has one (a file writer encodes the run
// into one buffer), else consume() for each.
void hand_over(Instance& inst, const ThreadInfo& thread, const ThreadBlock* b, const uint8_t* events,
               uint64_t n) {
  const ftjit_plugin* d = inst.plugin.desc;
  if (auto run = plugin_consume_run(d); run != nullptr) {
    run(&inst.ctx, &thread.info, events, n, b->event_size);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) d->consume(&inst.ctx, &thread.info, events + i * b->event_size);
}

void consume_range(Instance& inst, ThreadBlock* b, const uint8_t* events, uint64_t n) {
  const ThreadInfo thread(b);
  hand_over(inst, thread, b, events, n);
}

}  // namespace

Writer::Writer(std::vector<Instance*> instances, BufferPolicy policy, bool spool,
               ftjit_engine* engine)
    : instances_(std::move(instances)), engine_(engine) {
  mode_ = policy == BufferPolicy::kOverwrite         ? Mode::kRecorder
          : policy == BufferPolicy::kBlock && spool ? Mode::kSpool
                                                    : Mode::kStream;
  if (mode_ == Mode::kSpool) {
    spool_fd_ = open_spool();
    if (spool_fd_ < 0) {
      // Still complete (threads wait for the writer), only slower.
      ftjit::log().warn("ftjit: no spool file for the trace ({}); events are formatted as they "
                        "come", std::strerror(errno));
      mode_ = Mode::kStream;
    }
  }
  thread_ = std::thread([this] {
    mark_own_thread();  // never traced: counts are the program's
    run();
  });
}

Writer::~Writer() {
  stop();
  if (spool_fd_ >= 0) ::close(spool_fd_);
}

const char* Writer::mode_name() const {
  switch (mode_) {
    case Mode::kStream: return "stream";
    case Mode::kSpool: return "spool";
    case Mode::kRecorder: return "recorder";
  }
  return "?";
}

void Writer::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&wake_);
  thread_.join();
}

Status Writer::flush() {
  if (!thread_.joinable()) return make_error(FTJIT_E_NOT_ATTACHED, "the writer has stopped");
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = ++flush_asked_;
  wake_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&wake_);
  done_cv_.wait(lock, [&] { return flush_done_ >= ticket; });
  return {};
}

void Writer::run() {
  // Users see it in top and /proc, and can tell its calls from the
  // program's when a plugin's consume() calls traced code.
  pthread_setname_np(pthread_self(), "ftjit-writer");
  mark_writer_thread();
  auto last_refresh = std::chrono::steady_clock::now();
  for (;;) {
    const uint32_t seen = wake_.load(std::memory_order_acquire);
    const bool stopping = stop_.load(std::memory_order_acquire);
    uint64_t asked;
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked = flush_asked_;
    }
    const bool flushing = asked != flush_done_;
    // Names first, so events of a thread that renamed itself carry its
    // new name.
    auto now = std::chrono::steady_clock::now();
    if (stopping || flushing || now - last_refresh >= kNameRefreshPeriod) {
      for (Instance* inst : instances_) refresh_names(*inst);
      last_refresh = now;
    }
    if (mode_ != Mode::kRecorder || stopping || flushing) pass(stopping);
    if (flushing && !stopping) {
      std::lock_guard<std::mutex> lock(mu_);
      flush_done_ = asked;
      done_cv_.notify_all();
    }
    if (stopping) break;
    // The recorder sleeps until asked; the others wake every period too.
    futex_wait_for(&wake_, seen, mode_ == Mode::kRecorder ? 3'600'000'000'000ull : kWriterPeriodNs);
  }
  std::lock_guard<std::mutex> lock(mu_);
  flush_done_ = flush_asked_;
  done_cv_.notify_all();
}

// One visit of every ring; at a flush or the final pass, also what the
// spool holds.
void Writer::pass(bool final) {
  if (mode_ == Mode::kRecorder) {
    // Threads must not overwrite what is read: they drop while `dumping`
    // is set, and those inside a callback already are waited out. After
    // detach (final) none can be.
    if (!final) {
      for (Instance* inst : instances_) inst->dumping.store(1, std::memory_order_seq_cst);
      if (auto st = engine_of(engine_)->wait_for_callbacks(); !st) {
        ftjit::log().warn("ftjit: flight recorder not written now: {}", st.error().message);
        for (Instance* inst : instances_) inst->dumping.store(0, std::memory_order_release);
        return;
      }
    }
    for (Instance* inst : instances_) {
      for (ThreadBlock* b = inst->threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
        record_block(*inst, b);
      }
      inst->dumping.store(0, std::memory_order_release);
    }
    return;
  }
  for (uint32_t i = 0; i < instances_.size(); ++i) {
    Instance& inst = *instances_[i];
    for (ThreadBlock* b = inst.threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
      if (b->head.load(std::memory_order_acquire) == b->tail.load(std::memory_order_relaxed)) {
        after_drain(b);
        continue;
      }
      if (mode_ == Mode::kSpool) {
        spool_block(i, b);
      } else {
        stream_block(inst, b);
      }
    }
  }
  uint64_t asked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    asked = flush_asked_;
  }
  if (mode_ == Mode::kSpool && (final || asked != flush_done_)) replay_spool();
}

// The ring is empty now: a thread that gave up waiting may wait again, and
// one asleep is woken.
void Writer::after_drain(ThreadBlock* b) {
  if (b->head.load(std::memory_order_acquire) == b->tail.load(std::memory_order_relaxed)) {
    b->gave_up.store(0, std::memory_order_relaxed);
  }
  // Dekker with wait_for_room: the tail stores before, the thread's
  // `sleeping` after; one of the two sides sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (b->sleeping.load(std::memory_order_seq_cst) != 0) futex_wake_all(tail_word(b));
}

void Writer::stream_block(Instance& inst, ThreadBlock* b) {
  const ThreadInfo thread(b);
  drain_block(b, [&](const uint8_t* events, uint64_t n) {
    hand_over(inst, thread, b, events, n);
    // A thread asleep for room gets it at the first freed run (after_drain
    // makes sure of the wake; this makes it early).
    if (b->sleeping.load(std::memory_order_relaxed) != 0) futex_wake_all(tail_word(b));
  });
  after_drain(b);
}

// Appends the ring's committed events to the spool as one chunk (two
// pieces when they wrap), then frees them.
void Writer::spool_block(uint32_t inst_index, ThreadBlock* b) {
  const uint64_t t = b->tail.load(std::memory_order_relaxed);
  const uint64_t h = b->head.load(std::memory_order_acquire);
  const uint64_t capacity = b->mask + 1;
  const uint64_t first = t & b->mask;
  const uint64_t n1 = std::min(h - t, capacity - first);
  ChunkHeader header{inst_index, b->id, h - t};
  iovec iov[3] = {{&header, sizeof header},
                  {b->events + first * b->event_size, n1 * b->event_size},
                  {b->events, (h - t - n1) * b->event_size}};
  size_t want = 0;
  for (const iovec& v : iov) want += v.iov_len;
  ssize_t done = ::pwritev(spool_fd_, iov, iov[2].iov_len != 0 ? 3 : 2, static_cast<off_t>(spool_bytes_));
  if (done != static_cast<ssize_t>(want)) {
    // A short write leaves a torn chunk past spool_bytes_: it is never read.
    stop_spooling(done < 0 ? std::strerror(errno) : "short write (disk full?)");
    stream_block(*instances_[inst_index], b);
    return;
  }
  spool_bytes_ += want;
  b->tail.store(h, std::memory_order_seq_cst);
  after_drain(b);
}

// The flight recorder's ring: the last `capacity` events committed (the
// ones before were overwritten: counted), then the ring is empty.
void Writer::record_block(Instance& inst, ThreadBlock* b) {
  const uint64_t t = b->tail.load(std::memory_order_relaxed);
  const uint64_t h = b->head.load(std::memory_order_acquire);
  const uint64_t capacity = b->mask + 1;
  const uint64_t start = h - t > capacity ? h - capacity : t;
  if (start != t) b->overwritten.fetch_add(start - t, std::memory_order_relaxed);
  const ThreadInfo thread(b);
  for (uint64_t i = start; i != h;) {
    const uint64_t first = i & b->mask;
    const uint64_t n = std::min(h - i, capacity - first);  // up to the ring's end
    hand_over(inst, thread, b, b->events + first * b->event_size, n);
    i += n;
  }
  b->tail.store(h, std::memory_order_release);
}

// Hands every spooled event to consume(), chunk by chunk (each thread's
// chunks are in its commit order), then empties the spool.
void Writer::replay_spool() {
  if (spool_fd_ < 0 || spool_bytes_ == 0) return;
  void* map = ::mmap(nullptr, spool_bytes_, PROT_READ, MAP_PRIVATE, spool_fd_, 0);
  if (map == MAP_FAILED) {
    ftjit::log().error("ftjit: cannot read the trace spool back ({}): {} bytes of events lost",
                       std::strerror(errno), spool_bytes_);
  } else {
    std::vector<std::vector<ThreadBlock*>> blocks(instances_.size());
    for (size_t i = 0; i < instances_.size(); ++i) {
      for (ThreadBlock* b = instances_[i]->threads.load(std::memory_order_acquire); b != nullptr;
           b = b->next) {
        if (blocks[i].size() <= b->id) blocks[i].resize(b->id + 1, nullptr);
        blocks[i][b->id] = b;
      }
    }
    const auto* p = static_cast<const uint8_t*>(map);
    const uint8_t* end = p + spool_bytes_;
    while (p + sizeof(ChunkHeader) <= end) {
      ChunkHeader h;
      std::memcpy(&h, p, sizeof h);
      p += sizeof h;
      ThreadBlock* b = h.instance < blocks.size() && h.block < blocks[h.instance].size()
                           ? blocks[h.instance][h.block]
                           : nullptr;
      if (b == nullptr || h.events * b->event_size > static_cast<uint64_t>(end - p)) break;
      consume_range(*instances_[h.instance], b, p, h.events);
      p += h.events * b->event_size;
    }
    ::munmap(map, spool_bytes_);
  }
  spool_bytes_ = 0;
  if (::ftruncate(spool_fd_, 0) != 0) stop_spooling(std::strerror(errno));
}

// What was spooled is consumed now, and what comes later as it comes:
// each thread's order is kept.
void Writer::stop_spooling(const char* why) {
  if (mode_ != Mode::kSpool) return;
  ftjit::log().warn("ftjit: the trace spool failed ({}); events are formatted as they come from "
                    "now on", why);
  mode_ = Mode::kStream;
  replay_spool();
}

}  // namespace ftjit::plugins::detail

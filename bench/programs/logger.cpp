// SPDX-License-Identifier: MIT
// ftjit-bench-logger: a multi-threaded program made of code nobody here
// wrote. Four threads log through spdlog's asynchronous logger (its thread
// pool formats with {fmt} and writes a file); spdlog and {fmt} are compiled
// in whole (header-only), so every one of their functions the program
// uses carries a sled.
//
// With `own`, each thread logs through a synchronous logger of its own to
// a file of its own: nothing is shared, so the program's time is all
// computing ({fmt}, spdlog's formatting, the file's buffer) and does not
// swing with how the threads meet on a queue, as the asynchronous run's
// does (0.1 or 0.6 s). The latency rows, which compare costs per call,
// use that one.
//
//   ftjit-bench-logger [MESSAGES_PER_THREAD [own]]   (default 20000)
#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

constexpr int kThreads = 4;

bool temp_path(char (&path)[40]) {
  std::strcpy(path, "/tmp/ftjit-bench-logger-XXXXXX");
  const int fd = mkstemp(path);
  if (fd < 0) return false;
  close(fd);
  return true;
}

int shared_async(int messages) {
  char path[40];
  if (!temp_path(path)) return 1;
  spdlog::init_thread_pool(8192, 1);
  auto log = spdlog::basic_logger_mt<spdlog::async_factory>("bench", path, true);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < messages; ++i) log->info("thread {} message {} value {:.3f}", t, i, i * 0.5);
    });
  }
  for (auto& t : threads) t.join();
  spdlog::shutdown();
  std::remove(path);
  return 0;
}

int own_loggers(int messages) {
  char paths[kThreads][40];
  for (auto& path : paths) {
    if (!temp_path(path)) return 1;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto log = spdlog::basic_logger_st("bench" + std::to_string(t), paths[t], true);
      for (int i = 0; i < messages; ++i) log->info("thread {} message {} value {:.3f}", t, i, i * 0.5);
      log->flush();
    });
  }
  for (auto& t : threads) t.join();
  spdlog::shutdown();
  for (auto& path : paths) std::remove(path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int messages = argc > 1 ? std::atoi(argv[1]) : 20000;
  const bool own = argc > 2 && std::strcmp(argv[2], "own") == 0;
  return own ? own_loggers(messages) : shared_async(messages);
}

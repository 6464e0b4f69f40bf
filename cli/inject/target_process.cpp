// SPDX-License-Identifier: MIT
// What /proc says about a target: inspect_target, check_ptrace_permitted,
// stage_library, and the /proc helpers the other files share.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/inject/injector_isa.h"
#include "cli/inject/inject_internal.h"
#include "cli/inject/ptrace_inject.h"

namespace ftjit::inject {
namespace detail {

// ---------------------------------------------------------------------------
// Small /proc helpers
// ---------------------------------------------------------------------------

std::string errno_message(std::string_view what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

Result<std::string> read_text_file(const std::string& path, int* err_out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err_out) *err_out = err;
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot open " + path, err));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      if (err_out) *err_out = err;
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot read " + path, err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

std::optional<std::string> status_field(const std::string& status_text, std::string_view key) {
  size_t pos = 0;
  while (pos < status_text.size()) {
    size_t eol = status_text.find('\n', pos);
    if (eol == std::string::npos) eol = status_text.size();
    std::string_view line(status_text.data() + pos, eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      std::string_view v = line.substr(key.size() + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return std::string(v);
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

pid_t tracer_of(pid_t pid) {
  auto status = read_text_file("/proc/" + std::to_string(pid) + "/status");
  if (!status) return 0;
  auto v = status_field(*status, "TracerPid");
  return v ? static_cast<pid_t>(std::strtol(v->c_str(), nullptr, 10)) : 0;
}

namespace {

// The state letter of /proc/.../stat ("pid (comm) S ..."; comm may hold
// spaces and parentheses), or 0 if unreadable.
char stat_state(const std::string& stat_path) {
  auto stat = read_text_file(stat_path);
  if (!stat) return 0;
  size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return 0;
  return (*stat)[close + 2];
}

}  // namespace

bool process_gone(pid_t pid) {
  // Gone when no thread is left that is not a zombie (a main thread that
  // called pthread_exit is a zombie while the others run).
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(task_dir.c_str());
  if (!dir) return true;
  bool alive = false;
  while (dirent* de = ::readdir(dir)) {
    if (de->d_name[0] == '.') continue;
    char state = stat_state(task_dir + "/" + de->d_name + "/stat");
    if (state != 0 && state != 'Z' && state != 'X' && state != 'x') {
      alive = true;
      break;
    }
  }
  ::closedir(dir);
  return !alive;
}

Result<std::vector<Mapping>> read_maps(pid_t pid) {
  int err = 0;
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/maps", &err);
  if (!text) {
    if (err == ENOENT || err == ESRCH)
      return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
    return text.take_error();
  }
  std::vector<Mapping> maps;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t eol = text->find('\n', pos);
    if (eol == std::string::npos) eol = text->size();
    std::string line = text->substr(pos, eol - pos);
    pos = eol + 1;
    // start-end perms offset dev inode   path
    Mapping m;
    char perms[8] = {};
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*x:%*x %llu %n", &start, &end, perms, &offset,
                    &inode, &path_at) < 5)
      continue;
    m.start = start;
    m.end = end;
    m.offset = offset;
    m.inode = inode;
    m.perms = perms;
    if (path_at > 0 && static_cast<size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
    maps.push_back(std::move(m));
  }
  return maps;
}

std::optional<MappedModule> find_module(const std::vector<Mapping>& maps, std::string_view basename,
                                        bool prefix_match) {
  for (const Mapping& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || m.offset != 0) continue;
    std::string_view p = m.path;
    std::string_view base = p.substr(p.rfind('/') + 1);
    bool match = prefix_match ? base.substr(0, basename.size()) == basename : base == basename;
    if (match) return MappedModule{m.path, m.start};
  }
  return std::nullopt;
}

Error seize_refused(pid_t pid, pid_t tid, int err) {
  const std::string p = "process " + std::to_string(pid);
  if (err == EPERM) {
    pid_t tracer = tracer_of(pid);
    if (tracer != 0 && tracer != ::getpid())
      return make_error(FTJIT_E_INVALID_ARGUMENT, p + " is already traced by PID " + std::to_string(tracer) + " (a debugger?)");
    auto scope = read_text_file("/proc/sys/kernel/yama/ptrace_scope");
    if (scope && std::atoi(scope->c_str()) == 1)
      return make_error(FTJIT_E_UNSUPPORTED,
                        "ptrace is not permitted: /proc/sys/kernel/yama/ptrace_scope is 1 (only descendants may be traced); "
                        "run as root or with CAP_SYS_PTRACE, or set it to 0 (sysctl kernel.yama.ptrace_scope=0)");
    return make_error(FTJIT_E_UNSUPPORTED, "ptrace of " + p +
                                               " is not permitted (a setuid program, another user, or a security module): "
                                               "run ftjit as root or with CAP_SYS_PTRACE");
  }
  if (err == ESRCH) return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(tid) + " of " + p + " exited");
  return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_SEIZE of thread " + std::to_string(tid), err));
}

std::string path_in_root(pid_t pid, const std::string& target_path) {
  return "/proc/" + std::to_string(pid) + "/root" + target_path;
}

std::string map_files_path(pid_t pid, uint64_t start, uint64_t end) {
  char range[64];
  std::snprintf(range, sizeof range, "/%llx-%llx", static_cast<unsigned long long>(start),
                static_cast<unsigned long long>(end));
  return "/proc/" + std::to_string(pid) + "/map_files" + range;
}

const Mapping* mapping_at(const std::vector<Mapping>& maps, uint64_t start) {
  for (const Mapping& m : maps)
    if (m.start == start) return &m;
  return nullptr;
}

}  // namespace detail

using detail::errno_message;
using detail::read_text_file;
using detail::status_field;

namespace {

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

// CAP_SYS_PTRACE (bit 19) in this thread's effective set.
bool have_cap_sys_ptrace() {
  auto status = read_text_file("/proc/thread-self/status");
  if (!status) status = read_text_file("/proc/self/status");
  if (!status) return false;
  auto cap = status_field(*status, "CapEff");
  if (!cap) return false;
  unsigned long long bits = std::strtoull(cap->c_str(), nullptr, 16);
  return (bits >> 19) & 1;
}

// "a b c d" from a Uid:/Gid: line.
bool parse_ids(const std::optional<std::string>& field, unsigned long ids[4]) {
  if (!field) return false;
  return std::sscanf(field->c_str(), "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4;
}

// The one line for a process of another user, which only CAP_SYS_PTRACE
// lets us trace (a container's processes are root's, usually).
std::string another_user(pid_t pid, unsigned long uid) {
  return "process " + std::to_string(pid) + " belongs to another user (uid " + std::to_string(uid) +
         "): tracing it needs CAP_SYS_PTRACE: run ftjit as root (sudo) or as that user";
}

// Why we may not trace a process with these ids (the kernel's rule for
// PTRACE_MODE_REALCREDS), or an empty string.
std::string credential_problem(pid_t pid, const unsigned long uids[4], const unsigned long gids[4]) {
  if (have_cap_sys_ptrace()) return {};
  const std::string p = "process " + std::to_string(pid);
  unsigned long me_u = getuid(), me_g = getgid();
  bool other_user = uids[0] != me_u;
  if (other_user) return another_user(pid, uids[0]);
  if (uids[1] != me_u || uids[2] != me_u || gids[0] != me_g || gids[1] != me_g || gids[2] != me_g)
    return p + " runs with changed privileges (setuid/setgid program): tracing it needs CAP_SYS_PTRACE: "
               "run ftjit as root (sudo)";
  return {};
}

const char* machine_name(uint16_t machine, bool is64) {
  switch (machine) {
    case EM_X86_64: return is64 ? "x86-64" : "x32";
    case EM_386: return "32-bit x86";
    case EM_AARCH64: return "aarch64";
    case EM_ARM: return "32-bit arm";
    case EM_RISCV: return is64 ? "riscv64" : "riscv32";
    case EM_PPC64: return "ppc64";
    case EM_S390: return "s390x";
    default: return nullptr;
  }
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

// ---------------------------------------------------------------------------
// inspect_target
// ---------------------------------------------------------------------------

Result<TargetInfo> inspect_target(pid_t pid) {
  if (pid <= 0) return make_error(FTJIT_E_INVALID_ARGUMENT, "invalid process id " + std::to_string(pid));
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string p = "process " + std::to_string(pid);

  int err = 0;
  auto status = read_text_file(proc + "/status", &err);
  if (!status) {
    if (err == ENOENT || err == ESRCH) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
    return status.take_error();
  }
  TargetInfo info;
  info.pid = pid;
  info.root = proc + "/root";

  if (auto tgid = status_field(*status, "Tgid"); tgid && std::strtol(tgid->c_str(), nullptr, 10) != pid)
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      std::to_string(pid) + " is a thread of process " + *tgid + ": use -p " + *tgid);
  if (auto state = status_field(*status, "State"); state && !state->empty() && ((*state)[0] == 'Z' || (*state)[0] == 'X'))
    return make_error(FTJIT_E_INVALID_ARGUMENT, p + " has exited (a zombie waiting for its parent)");
  if (auto kthread = status_field(*status, "Kthread"); kthread && *kthread == "1")
    return make_error(FTJIT_E_INVALID_ARGUMENT, p + " is a kernel thread, not a program");

  unsigned long uids[4] = {}, gids[4] = {};
  if (!parse_ids(status_field(*status, "Uid"), uids) || !parse_ids(status_field(*status, "Gid"), gids))
    return make_error(FTJIT_E_SYSTEM, "cannot parse Uid/Gid of " + proc + "/status");
  info.uid = static_cast<uid_t>(uids[0]);
  info.gid = static_cast<gid_t>(gids[0]);
  if (auto t = status_field(*status, "TracerPid")) info.tracer_pid = static_cast<pid_t>(std::strtol(t->c_str(), nullptr, 10));
  if (std::string why = credential_problem(pid, uids, gids); !why.empty())
    return make_error(FTJIT_E_INVALID_ARGUMENT, why);

  // The executable, as the target names it.
  char link[4096];
  ssize_t n = ::readlink((proc + "/exe").c_str(), link, sizeof link - 1);
  if (n < 0) {
    int e = errno;
    if (e == ENOENT && detail::process_gone(pid)) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
    if (e == ENOENT) return make_error(FTJIT_E_INVALID_ARGUMENT, p + " has no executable (a kernel thread?)");
    if (e == EACCES || e == EPERM)
      return make_error(FTJIT_E_INVALID_ARGUMENT, p + " cannot be inspected (" + std::strerror(e) +
                                                      "): run ftjit as its user or with CAP_SYS_PTRACE");
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot read " + proc + "/exe", e));
  }
  link[n] = '\0';
  info.exe = link;
  const std::string pe = p + " (" + info.exe + ")";

  // Its ELF header and program headers, read through the magic link so
  // that another mount namespace does not matter.
  int fd = ::open((proc + "/exe").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot open " + proc + "/exe", errno));
  unsigned char ident[EI_NIDENT] = {};
  Elf64_Ehdr eh{};
  bool ok = ::pread(fd, ident, sizeof ident, 0) == static_cast<ssize_t>(sizeof ident) &&
            std::memcmp(ident, ELFMAG, SELFMAG) == 0;
  if (!ok) {
    ::close(fd);
    return make_error(FTJIT_E_UNSUPPORTED, pe + " does not run an ELF program");
  }
  bool is64 = ident[EI_CLASS] == ELFCLASS64;
  // e_machine sits at the same offset in both classes.
  uint16_t machine = 0;
  if (::pread(fd, &machine, sizeof machine, offsetof(Elf64_Ehdr, e_machine)) != sizeof machine) machine = 0;
  info.e_machine = machine;

  // A qemu-user emulator runs a program of another ISA: name that one.
  std::string_view base = std::string_view(info.exe).substr(info.exe.rfind('/') + 1);
  if (base.substr(0, 5) == "qemu-") {
    std::string arch(base.substr(5));
    if (size_t dash = arch.find('-'); dash != std::string::npos) arch.resize(dash);
    ::close(fd);
    return make_error(FTJIT_E_UNSUPPORTED, p + " is an " + arch + " program run by " + std::string(base) +
                                               ": qemu-user gives no ptrace into its guests, so ftjit attach cannot load its agent "
                                               "(start the program with `ftjit run` instead)");
  }
  if (!(is64 && ident[EI_DATA] == ELFDATA2LSB && machine == detail::injector_isa().e_machine)) {
    ::close(fd);
    const char* name = machine_name(machine, is64);
    std::string what = name ? std::string(name) : "e_machine " + std::to_string(machine);
    return make_error(FTJIT_E_UNSUPPORTED, p + " is a" + (what[0] == 'a' || what[0] == 'x' ? "n " : " ") + what +
                                               " program; ftjit attach serves " + detail::injector_isa().name +
                                               " processes");
  }
  info.isa = detail::injector_isa().isa;

  bool has_interp = false;
  if (::pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh) && eh.e_phentsize == sizeof(Elf64_Phdr)) {
    for (unsigned i = 0; i < eh.e_phnum && i < 4096; ++i) {
      Elf64_Phdr ph{};
      if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != sizeof ph) break;
      if (ph.p_type == PT_INTERP) has_interp = true;
    }
  }
  ::close(fd);
  info.static_linked = !has_interp;
  if (info.static_linked)
    return make_error(FTJIT_E_UNSUPPORTED, pe + " is statically linked: no dlopen to load the agent with; "
                                                "start it with `ftjit run` instead");

  // Same mount namespace and the same "/"?
  char ns_self[128] = {}, ns_target[128] = {};
  ssize_t a = ::readlink("/proc/self/ns/mnt", ns_self, sizeof ns_self - 1);
  ssize_t b = ::readlink((proc + "/ns/mnt").c_str(), ns_target, sizeof ns_target - 1);
  bool same_ns = a < 0 || b < 0 || std::strcmp(ns_self, ns_target) == 0;
  info.same_mount_ns = same_ns && same_file("/", info.root);
  return info;
}

// ---------------------------------------------------------------------------
// check_ptrace_permitted
// ---------------------------------------------------------------------------

Status check_ptrace_permitted(const TargetInfo& target) {
  const std::string p = "process " + std::to_string(target.pid);
  pid_t tracer = detail::tracer_of(target.pid);
  if (tracer == 0) tracer = target.tracer_pid;
  if (tracer != 0)
    return make_error(FTJIT_E_UNSUPPORTED, p + " is already traced by PID " + std::to_string(tracer) + " (a debugger?)");

  int err = 0;
  auto scope_text = read_text_file("/proc/sys/kernel/yama/ptrace_scope", &err);
  int scope = 0;  // no Yama: classic rules
  if (scope_text) scope = std::atoi(scope_text->c_str());
  bool cap = have_cap_sys_ptrace();
  if (scope >= 3)
    return make_error(FTJIT_E_UNSUPPORTED,
                      "ptrace is disabled: /proc/sys/kernel/yama/ptrace_scope is 3 (no attach, until reboot); "
                      "start the program with `ftjit run` instead");
  if (scope == 2 && !cap)
    return make_error(FTJIT_E_UNSUPPORTED,
                      "ptrace is not permitted: /proc/sys/kernel/yama/ptrace_scope is 2 (admin-only attach); "
                      "run as root or set it to 1 (sysctl kernel.yama.ptrace_scope=1)");
  if (!cap && (target.uid != getuid())) return make_error(FTJIT_E_UNSUPPORTED, another_user(target.pid, target.uid));
  return {};
}

// ---------------------------------------------------------------------------
// stage_library
// ---------------------------------------------------------------------------

namespace {

// Copies src_fd into a new file in dir_fd named name (via a temporary and a
// rename, so a copy the target has mapped already stays intact).
Status copy_into(int src_fd, int dir_fd, const std::string& name, uid_t uid, gid_t gid) {
  std::string tmp = "." + name + "." + std::to_string(getpid()) + ".tmp";
  ::unlinkat(dir_fd, tmp.c_str(), 0);
  int out = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
  if (out < 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot create " + tmp, errno));
  char buf[65536];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(src_fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(out);
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the library", e));
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out, buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        int e = errno;
        ::close(out);
        ::unlinkat(dir_fd, tmp.c_str(), 0);
        return make_error(FTJIT_E_SYSTEM, errno_message("cannot write the library copy", e));
      }
      done += w;
    }
    off += n;
  }
  if (geteuid() == 0) (void)::fchown(out, uid, gid);
  ::close(out);
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    int e = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot rename the library copy to " + name, e));
  }
  return {};
}

}  // namespace

Result<std::string> stage_library(const TargetInfo& target, const std::string& host_path) {
  int src = ::open(host_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (src < 0)
    return make_error(FTJIT_E_INVALID_ARGUMENT, errno_message("cannot open the library " + host_path, errno));
  struct stat st;
  if (::fstat(src, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(src);
    return make_error(FTJIT_E_INVALID_ARGUMENT, host_path + " is not a regular file");
  }
  // Visible under the same path inside the target's root?
  if (host_path.size() > 0 && host_path[0] == '/') {
    struct stat there;
    if (::stat((target.root + host_path).c_str(), &there) == 0 &&
        there.st_dev == st.st_dev && there.st_ino == st.st_ino) {
      ::close(src);
      return host_path;
    }
  }

  // Copy it to /tmp/ftjit-<uid>/ inside the target's root, never following
  // a symlink the target's user may have planted on the way.
  const std::string dir_name = "ftjit-" + std::to_string(target.uid);
  const std::string base = host_path.substr(host_path.rfind('/') + 1);
  const std::string shown = target.root + "/tmp/" + dir_name;
  int root_fd = ::open(target.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    int e = errno;
    ::close(src);
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot open " + target.root, e));
  }
  int tmp_fd = ::openat(root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(root_fd);
  if (tmp_fd < 0) {
    int e = errno;
    ::close(src);
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot open /tmp of process " + std::to_string(target.pid), e));
  }
  if (::mkdirat(tmp_fd, dir_name.c_str(), 0700) != 0 && errno != EEXIST) {
    int e = errno;
    ::close(tmp_fd);
    ::close(src);
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot create " + shown, e));
  }
  int dir_fd = ::openat(tmp_fd, dir_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(tmp_fd);
  if (dir_fd < 0) {
    int e = errno;
    ::close(src);
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot open " + shown + " (not a directory?)", e));
  }
  struct stat dst;
  if (geteuid() == 0 && ::fstat(dir_fd, &dst) == 0 && dst.st_uid == 0 && target.uid != 0)
    (void)::fchown(dir_fd, target.uid, target.gid);
  if (::fstat(dir_fd, &dst) != 0 || (dst.st_uid != target.uid && dst.st_uid != geteuid()) ||
      (dst.st_mode & 077) != 0) {
    ::close(dir_fd);
    ::close(src);
    return make_error(FTJIT_E_SYSTEM, shown + " is not a private directory of uid " + std::to_string(target.uid) +
                                          ": remove it and retry");
  }
  Status copied = copy_into(src, dir_fd, base, target.uid, target.gid);
  ::close(dir_fd);
  ::close(src);
  FTJIT_TRY(copied);
  return "/tmp/" + dir_name + "/" + base;
}

namespace {

// The target's /tmp/ftjit-<uid> as a descriptor, opened without following
// a symlink on the way; -1 with errno if it cannot be.
int open_staging_dir(const TargetInfo& target) {
  int root_fd = ::open(target.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return -1;
  int tmp_fd = ::openat(root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(root_fd);
  if (tmp_fd < 0) return -1;
  const std::string dir_name = "ftjit-" + std::to_string(target.uid);
  int dir_fd = ::openat(tmp_fd, dir_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  ::close(tmp_fd);
  errno = e;
  return dir_fd;
}

}  // namespace

bool is_staged_copy(const TargetInfo& target, const std::string& path_in_target) {
  const std::string dir = "/tmp/ftjit-" + std::to_string(target.uid) + "/";
  return path_in_target.size() > dir.size() && path_in_target.compare(0, dir.size(), dir) == 0 &&
         path_in_target.find('/', dir.size()) == std::string::npos;
}

Status remove_staged_copy(const TargetInfo& target, const std::string& path_in_target) {
  if (!is_staged_copy(target, path_in_target)) return {};
  int dir_fd = open_staging_dir(target);
  if (dir_fd < 0) {
    if (errno == ENOENT) return {};
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot open the directory of " + path_in_target +
                                                        " in process " + std::to_string(target.pid), errno));
  }
  const std::string base = path_in_target.substr(path_in_target.rfind('/') + 1);
  int rc = ::unlinkat(dir_fd, base.c_str(), 0);
  int e = errno;
  ::close(dir_fd);
  if (rc != 0 && e != ENOENT)
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot remove " + path_in_target + " from process " +
                                                        std::to_string(target.pid) + "'s root", e));
  return {};
}

void remove_staging_dir_if_empty(const TargetInfo& target) {
  int root_fd = ::open(target.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return;
  int tmp_fd = ::openat(root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(root_fd);
  if (tmp_fd < 0) return;
  (void)::unlinkat(tmp_fd, ("ftjit-" + std::to_string(target.uid)).c_str(), AT_REMOVEDIR);
  ::close(tmp_fd);
}

bool mapping_outlives_its_file(pid_t pid, const std::string& path_in_target) {
  auto maps = detail::read_maps(pid);
  if (!maps) return false;
  for (const detail::Mapping& m : *maps) {
    if (m.offset != 0 || m.path != path_in_target) continue;
    int fd = ::open(detail::map_files_path(pid, m.start, m.end).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }
  return false;
}

}  // namespace ftjit::inject

// SPDX-License-Identifier: MIT
// ftjit-bench-logger: a multi-threaded program made of code nobody here
// wrote. Four threads log through spdlog's asynchronous logger (its thread
// pool formats with {fmt} and writes a file); spdlog and {fmt} are compiled
// in whole (header-only), so every one of their functions the program
// uses carries a sled.
//
//   ftjit-bench-logger [MESSAGES_PER_THREAD]   (default 20000)
#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int messages = argc > 1 ? std::atoi(argv[1]) : 20000;
  char path[] = "/tmp/ftjit-bench-logger-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return 1;
  spdlog::init_thread_pool(8192, 1);
  auto log = spdlog::basic_logger_mt<spdlog::async_factory>("bench", path, true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < messages; ++i) log->info("thread {} message {} value {:.3f}", t, i, i * 0.5);
    });
  }
  for (auto& t : threads) t.join();
  spdlog::shutdown();
  std::remove(path);
  return 0;
}

// SPDX-License-Identifier: MIT
// spdlog's implementation, compiled once, into ftjit's own objects.
//
// Debian ships spdlog's headers with their implementation files (the
// "-inl.h" ones) but no static library, and a shared libspdlog is what the
// agent must not bring into a traced process. Used header-only, every file
// that logs compiled all of spdlog again: a third of a sanitized build's
// time. With SPDLOG_COMPILED_LIB (ftjit_logging's users all see it) the
// headers only declare, and this file is the one that defines: the
// implementation headers, and the class and function templates ftjit
// instantiates (its sinks: stderr, null, stderr in colour).
#ifndef SPDLOG_COMPILED_LIB
#error "spdlog_compiled.cpp is built with SPDLOG_COMPILED_LIB (ftjit_logging)"
#endif

#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/sinks/stdout_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

#include <mutex>

// The sinks' bases, thread-safe and not.
template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;

// stderr_sink_mt (the agent's sink: plain text, into the target's stderr).
template class spdlog::sinks::stdout_sink_base<spdlog::details::console_mutex>;
template class spdlog::sinks::stdout_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::stderr_sink<spdlog::details::console_mutex>;

// stderr_color_mt (the CLI's and the bench's), and the registry's default
// logger (stdout in colour).
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stdout_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stderr_sink<spdlog::details::console_mutex>;
template std::shared_ptr<spdlog::logger> spdlog::stderr_color_mt<spdlog::synchronous_factory>(
    const std::string& logger_name, color_mode mode);

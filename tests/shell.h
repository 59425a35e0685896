// Runs a shell command for the end-to-end tests and returns its exit code and standard output
// (redirect stderr in the command to capture or drop it).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace gpumux::testing {

struct ShellResult {
  int exit_code = -1;
  std::string out;
};

inline ShellResult Shell(const std::string& command) {
  ShellResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

#ifdef GPUMUX_BINARY
// Runs the built `gpumux` with `args` as a user would; its stderr comes with its stdout.
inline ShellResult Gpumux(const std::string& args) {
  return Shell(std::string(GPUMUX_BINARY) + " " + args + " 2>&1");
}
#endif

}  // namespace gpumux::testing

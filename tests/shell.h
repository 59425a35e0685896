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

}  // namespace gpumux::testing

// The one error type of gpumux. Every layer throws `Error`; its code says what kind of failure it
// is, and is mapped once to the command line's exit status (ExitCode) and once to gpumuxd's HTTP
// status (HttpStatus), in error.cc. what() is a complete message for a person: where (file:line
// and field, flag, tenant or GPU when known), what, and why.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace gpumux {

enum class ErrorCode {
  kBadInput,  // the input is wrong: a file, a flag, a request body, a limit   exit 2, HTTP 400
  kNotFound,  // what the input names does not exist                            exit 2, HTTP 404
  kPermissionDenied,  // the caller may not do this                                     exit 2, HTTP
                      // 403
  kDoesNotFit,   // valid, but there is no room (a quota past the GPU's memory)    exit 3, HTTP 409
  kConflict,     // valid, but not in the present state (live tenants)             exit 3, HTTP 409
  kUnavailable,  // a device, driver or service cannot be reached or refuses       exit 4, HTTP 503
  kInternal,     // a failure gpumux did not expect (a bug, a failing system call) exit 1, HTTP 500
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }
  // The same error with `context` (a file, a flag, a tenant) in front of its message.
  Error Within(std::string_view context) const;

 private:
  ErrorCode code_;
};

// Shorthands, so that a throw reads as what happened: `throw BadInput("--mem: ...")`.
inline Error BadInput(const std::string& message) { return {ErrorCode::kBadInput, message}; }
inline Error NotFound(const std::string& message) { return {ErrorCode::kNotFound, message}; }
inline Error PermissionDenied(const std::string& message) {
  return {ErrorCode::kPermissionDenied, message};
}
inline Error DoesNotFit(const std::string& message) { return {ErrorCode::kDoesNotFit, message}; }
inline Error Conflict(const std::string& message) { return {ErrorCode::kConflict, message}; }
inline Error Unavailable(const std::string& message) { return {ErrorCode::kUnavailable, message}; }
inline Error Internal(const std::string& message) { return {ErrorCode::kInternal, message}; }

// Exit statuses of the `gpumux` command (README "Exit codes"); 0 is success.
inline constexpr int kExitOk = 0;
int ExitCode(ErrorCode code);
// gpumuxd's HTTP status for an error, and the code a client reads back from a status (>= 400).
int HttpStatus(ErrorCode code);
ErrorCode ErrorCodeForHttpStatus(int status);

}  // namespace gpumux

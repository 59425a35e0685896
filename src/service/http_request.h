// Parsing one HTTP/1.1 request (or response) as gpumuxd's API speaks it: a start line, headers and
// a Content-Length body (no chunked encoding, no pipelining). Pure functions of their input, so
// the server can feed them what has arrived so far and the fuzzer can feed them anything.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/process.h"

namespace gpumux::service {

inline constexpr size_t kMaxHeadBytes = 16 << 10;  // start line and headers
inline constexpr size_t kMaxBodyBytes = 1 << 20;   // the API's JSON bodies are a few hundred bytes

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string body;
  bool has_credentials = false;  // true on the Unix socket
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  // The process that connected, held by a pidfd from accept on (null if it had exited by then):
  // once it exits, a process that holds `pid` is another.
  std::shared_ptr<const ProcessHandle> caller{};
  // Came on the tenants' socket (the one mounted into containers): its caller is never an
  // operator, root included.
  bool tenant_socket = false;
  std::string query{};  // after the '?' of the target, as sent (not decoded); empty if none
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // A descriptor sent with the answer (SCM_RIGHTS; on a Unix socket only), closed when the last
  // copy of the answer is gone: see PassDescriptor.
  std::shared_ptr<const int> descriptor{};
};

// Owns `fd` for an HttpResponse's `descriptor` (null for a negative `fd`).
std::shared_ptr<const int> PassDescriptor(int fd);

// A parsed message: its start line, headers (names lower-cased) and body.
struct HttpMessage {
  std::string start_line;
  std::map<std::string, std::string> headers;
  std::string body;
};

enum class ParseStatus {
  kIncomplete,  // more bytes are needed
  kComplete,    // `message` holds it
  kMalformed,   // 400 (`error` says why)
  kTooLarge,    // head over kMaxHeadBytes (431) or body over kMaxBodyBytes (413)
};

struct ParseResult {
  ParseStatus status = ParseStatus::kIncomplete;
  std::string error;    // for kMalformed and kTooLarge: what is wrong, for the 4xx answer
  int http_status = 0;  // for kMalformed and kTooLarge: 400, 411, 413 or 431
};

// Parses the message that `data` (all bytes received so far) starts with.
ParseResult ParseHttpMessage(std::string_view data, HttpMessage* message);

// The request in a complete message: method and path from the start line. Malformed when the
// start line is not "METHOD /PATH HTTP/1.x"; `error` then says why.
bool ToRequest(const HttpMessage& message, HttpRequest* request, std::string* error);

// "HTTP/1.1 200 OK\r\n...": the whole response, Connection: close.
// With `chunk_over` > 0, a body longer than that goes out with Transfer-Encoding: chunked, in
// chunks of that size, as Go's net/http sends an answer it does not buffer whole.
std::string FormatResponse(const HttpResponse& response, size_t chunk_over = 0);
// The reason phrase of a status ("Not Found"), "Unknown" for one gpumuxd never sends.
const char* ReasonPhrase(int status);

}  // namespace gpumux::service

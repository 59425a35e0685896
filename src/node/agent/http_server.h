// A small HTTP/1.1 server for gpumuxd's API: one request per connection (Connection: close), on a
// Unix socket, where each request carries the caller's credentials (SO_PEERCRED) for permission
// checks, and optionally on a TCP address for Prometheus scrapes (no credentials there).
//
// Why not cpp-httplib: its handlers cannot see the connection's socket, so they cannot learn who is
// calling; the API's permission model needs exactly that. The server is small on purpose: requests
// are a few hundred bytes of JSON from the CLI, the SPANK plugin and Prometheus.
//
// Thread-safety: Serve() runs in one thread and calls the handler for one request at a time;
// Stop() may be called from any thread (or a signal handler).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"

namespace gpumux::agent {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string body;
  bool has_credentials = false;  // true on the Unix socket
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

class HttpServer {
 public:
  HttpServer() = default;
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on a Unix socket at `path` (replacing a stale socket file; mode 0666: callers are
  // told apart by their credentials, not by file permissions). Throws Error (unavailable).
  void ListenUnix(const std::string& path);
  // Listens on "HOST:PORT" (port 0 picks one; see tcp_port()). Throws Error (unavailable).
  void ListenTcp(const std::string& address);
  int tcp_port() const { return tcp_port_; }

  // Accepts and answers requests until Stop(). Requests larger than 1 MiB are refused (413).
  void Serve(const std::function<HttpResponse(const HttpRequest&)>& handler);
  void Stop() { stopped_.store(true); }

 private:
  void Answer(int fd, bool unix_socket, const std::function<HttpResponse(const HttpRequest&)>& handler);
  std::vector<std::pair<int, bool>> listeners_;  // (fd, is Unix)
  std::string unix_path_;
  int tcp_port_ = 0;
  std::atomic<bool> stopped_{false};
};

// Sends one request to a gpumuxd Unix socket and returns (status, body). Throws Error (unavailable) if the
// agent cannot be reached. For the CLI, the SPANK plugin and the tests.
std::pair<int, std::string> CallUnix(const std::string& socket_path, const std::string& method,
                                     const std::string& path, const std::string& body = "");

}  // namespace gpumux::agent

// gpumuxd's HTTP/1.1 server: one request per connection (Connection: close), on a Unix socket,
// where each request carries the caller's credentials (SO_PEERCRED) for permission checks, and
// optionally on a TCP address for Prometheus scrapes (no credentials there).
//
// No client can stall another. One thread runs an event loop (poll) over every connection: it
// accepts, reads whatever has arrived, and answers 408 to a request not complete within its
// deadline from connecting, however slowly its bytes trickle in. Complete requests go to a pool
// of worker threads that run the handler, so a slow handler does not stop the loop from reading,
// timing out or answering others. Limits: connections in all, and connections per caller — its
// uid; for root on the tenants' socket, its container (control groups); for TCP, its address.
// Root on the API socket, the operator, is exempt: it is trusted, and Slurm's steps come from it.
// A new connection past its caller's limit takes the place of that caller's oldest one whose
// request is incomplete, and past the limit in all, of such a one of the caller holding the most;
// only where there is none is it answered 429 or 503 at once. So no caller holding connections open
// and idle keeps another's complete request out (a scrape beside a pod that holds sockets open).
//
// Why not cpp-httplib: its handlers cannot see the connection's socket, so they cannot learn who is
// calling; the API's permission model needs exactly that. Requests are parsed by http_request.h.
//
// Thread-safety: Serve() runs in one thread; the handler is called from several worker threads at
// once and must be thread-safe. Stop() may be called from any thread or a signal handler.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "service/http_request.h"

namespace gpumux::service {

struct HttpServerLimits {
  int request_deadline_ms = 5000;  // from accepting a connection to its request being complete
  int write_deadline_ms = 5000;    // for the client to take its answer
  int max_connections = 1024;      // open at once, all callers
  int max_connections_per_caller = 32;  // open at once by one caller (see above)
  int workers = 4;                // threads that run the handler
  size_t chunk_answers_over = 0;  // bytes; 0: every answer has a Content-Length (FormatResponse)
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  explicit HttpServer(HttpServerLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on a Unix socket at `path` (replacing a stale socket file; mode 0666: callers are
  // told apart by their credentials, not by file permissions). Requests on a `tenant_socket` are
  // marked so (HttpRequest::tenant_socket). Throws Error (unavailable).
  void ListenUnix(const std::string& path, bool tenant_socket = false);
  // Listens on "HOST:PORT" (port 0 picks one; see tcp_port()). Throws Error (unavailable, or bad
  // input for an address that is not IPv4 HOST:PORT).
  void ListenTcp(const std::string& address);
  int tcp_port() const { return tcp_port_; }

  // Accepts and answers requests until Stop(). A handler that throws is answered 500 and logged
  // with its message.
  void Serve(const Handler& handler);
  void Stop();
  // Makes SIGTERM and SIGINT Stop() this server (one per process), and ignores SIGPIPE: how a
  // program that serves until told to stop begins.
  void StopOnTerminationSignals();

 private:
  struct Listener {
    int fd;
    bool is_unix;
    bool tenant_socket;
  };
  HttpServerLimits limits_;
  std::vector<Listener> listeners_;
  std::vector<std::string> unix_paths_;
  int tcp_port_ = 0;
  int wake_[2] = {-1, -1};  // a pipe: workers and Stop() wake the event loop through it
  std::atomic<bool> stopped_{false};
};

}  // namespace gpumux::service

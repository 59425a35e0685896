#include "service/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include "base/cgroup.h"
#include "base/error.h"
#include "base/process.h"
#include "service/http_client.h"
#include "service/log.h"

namespace gpumux::service {
namespace {

using Clock = std::chrono::steady_clock;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

HttpResponse ErrorAnswer(int status, const std::string& why) {
  // The reason is gpumuxd's own text (no request bytes), so it is plain ASCII and needs no escaping
  // beyond quotes and backslashes.
  return {status, "{\"error\": \"" + EscapeQuoted(why) + "\"}\n"};
}

struct Connection {
  int fd = -1;
  // Whose connections it counts among (ConnectionKey); empty, not capped, for root on the API
  // socket alone.
  std::string key;
  HttpRequest request;
  enum class State { kReading, kHandling, kWriting } state = State::kReading;
  Clock::time_point deadline;
  std::string in, out;
  size_t written = 0;
  std::shared_ptr<const int> descriptor;  // sent with the answer's first bytes, then let go
};

// The handler's side of the server: complete requests wait here for a worker; answers wait for
// the event loop, which a byte on the wake pipe calls.
class Workers {
 public:
  Workers(int count, const HttpServer::Handler& handler, int wake_fd)
      : handler_(handler), wake_fd_(wake_fd) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void Submit(uint64_t id, HttpRequest request) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.emplace_back(id, std::move(request));
    }
    cv_.notify_one();
  }
  std::vector<std::pair<uint64_t, HttpResponse>> TakeAnswers() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(answers_, {});
  }

 private:
  void Run() {
    for (;;) {
      std::pair<uint64_t, HttpRequest> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return quit_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // quitting, with nothing left to answer
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      HttpResponse response;
      try {
        response = handler_(job.second);
      } catch (const std::exception& e) {
        Log("error", "request handler failed",
            {{"method", job.second.method}, {"path", job.second.path}, {"reason", e.what()}});
        response = ErrorAnswer(500, "internal error (see gpumuxd's log)");
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        answers_.emplace_back(job.first, std::move(response));
      }
      char byte = 1;
      (void)!write(wake_fd_, &byte, 1);
    }
  }

  const HttpServer::Handler& handler_;
  int wake_fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, HttpRequest>> jobs_;
  std::vector<std::pair<uint64_t, HttpResponse>> answers_;
  bool quit_ = false;
  std::vector<std::thread> threads_;
};

// Whose connections a new one counts among, for the limits per caller: the uid of a Unix socket's
// caller; for root on the tenants' socket, where most containers' processes run as root, its
// container (its control groups); for a TCP caller (a scrape), its address. Empty for root on the
// API socket, the operator, which is not capped.
std::string ConnectionKey(int fd, bool is_unix, const HttpRequest& r) {
  if (is_unix) {
    if (!r.has_credentials) return "uid:?";
    if (r.uid != 0) return "uid:" + std::to_string(r.uid);
    if (!r.tenant_socket) return "";
    return "root:" + ProcessGroupsText(r.pid);
  }
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  char text[INET6_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
      peer.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&peer)->sin_addr, text, sizeof(text));
  return std::string("ip:") + text;
}

// Sends what it can of `bytes` with `descriptor` attached (SCM_RIGHTS): the client receives it
// with the first of them. As send().
ssize_t SendWithDescriptor(int fd, std::string_view bytes, int descriptor) {
  iovec io{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &descriptor, sizeof(int));
  return sendmsg(fd, &message, MSG_NOSIGNAL);
}

// One attempt to send a short refusal on a fresh socket, which has room for it.
void RefuseAtOnce(int fd, int status, const std::string& why) {
  std::string text = FormatResponse(ErrorAnswer(status, why));
  (void)!send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
}

}  // namespace

HttpServer::HttpServer(HttpServerLimits limits) : limits_(limits) {
  if (pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) throw Unavailable(Errno("pipe"));
}

HttpServer::~HttpServer() {
  for (const Listener& l : listeners_) close(l.fd);
  for (const std::string& path : unix_paths_) unlink(path.c_str());
  close(wake_[0]);
  close(wake_[1]);
}

namespace {
std::atomic<HttpServer*> g_signalled_server{nullptr};
void StopSignalledServer(int) {
  if (HttpServer* server = g_signalled_server.load()) server->Stop();
}
}  // namespace

void HttpServer::StopOnTerminationSignals() {
  g_signalled_server = this;
  signal(SIGTERM, StopSignalledServer);
  signal(SIGINT, StopSignalledServer);
  signal(SIGPIPE, SIG_IGN);
}

void HttpServer::Stop() {
  stopped_.store(true);
  char byte = 0;
  (void)!write(wake_[1], &byte, 1);  // async-signal-safe
}

void HttpServer::ListenUnix(const std::string& path, bool tenant_socket) {
  sockaddr_un addr = UnixSocketAddress(path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw Unavailable(Errno("socket"));
  unlink(path.c_str());  // a stale socket of a previous run
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 256) != 0) {
    std::string why = Errno(path);
    close(fd);
    throw Unavailable(why);
  }
  chmod(path.c_str(), 0666);
  listeners_.push_back({fd, true, tenant_socket});
  unix_paths_.push_back(path);
}

void HttpServer::ListenTcp(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw BadInput("'" + address + "': expected HOST:PORT");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(std::atoi(address.c_str() + colon + 1)));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    throw BadInput("'" + address + "': expected an IPv4 HOST:PORT");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 256) != 0) {
    std::string why = Errno(address);
    if (fd >= 0) close(fd);
    throw Unavailable(why);
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  tcp_port_ = ntohs(addr.sin_port);
  listeners_.push_back({fd, false, false});
}

void HttpServer::Serve(const Handler& handler) {
  std::map<uint64_t, Connection> connections;
  std::map<std::string, int> per_key;  // open connections per caller (Connection::key)
  uint64_t next_id = 0;
  Workers workers(std::max(1, limits_.workers), handler, wake_[1]);

  auto close_connection = [&](std::map<uint64_t, Connection>::iterator it) {
    close(it->second.fd);
    if (--per_key[it->second.key] == 0) per_key.erase(it->second.key);
    return connections.erase(it);
  };
  // Drops the oldest connection of caller `key` whose request is still incomplete, to make room for
  // a new one; false if it has none. So connections held open and idle never keep a complete
  // request out: not one from the same caller, nor, when all are taken, anyone else's.
  auto drop_oldest_waiting = [&](const std::string& key) {
    for (auto it = connections.begin(); it != connections.end(); ++it) {
      if (it->second.key == key && it->second.state == Connection::State::kReading) {
        RefuseAtOnce(it->second.fd, 429, "dropped for a newer connection from this caller");
        it->second.fd = -1;
        close_connection(it);
        return true;
      }
    }
    return false;
  };
  auto respond = [&](Connection& c, const HttpResponse& response) {
    c.out = FormatResponse(response, limits_.chunk_answers_over);
    c.written = 0;
    c.descriptor = c.request.has_credentials ? response.descriptor : nullptr;  // Unix sockets
    c.state = Connection::State::kWriting;
    c.deadline = Clock::now() + std::chrono::milliseconds(limits_.write_deadline_ms);
  };
  auto accept_from = [&](const Listener& l) {
    for (;;) {
      int fd = accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;  // EAGAIN: none left; anything else: the next poll tries again
      Connection c;
      c.fd = fd;
      if (l.is_unix) {
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
          c.request.has_credentials = true;
          c.request.tenant_socket = l.tenant_socket;
          c.request.uid = cred.uid;
          c.request.gid = cred.gid;
          c.request.pid = cred.pid;
          c.request.caller = ProcessHandle::OfPeer(fd, cred.pid);
        }
      }
      c.key = ConnectionKey(fd, l.is_unix, c.request);
      if (!c.key.empty() && per_key[c.key] >= limits_.max_connections_per_caller &&
          !drop_oldest_waiting(c.key)) {
        RefuseAtOnce(fd, 429,
                     "too many open connections from this caller (" +
                         std::to_string(limits_.max_connections_per_caller) + ")");
        if (per_key[c.key] == 0) per_key.erase(c.key);
        continue;
      }
      if (connections.size() >= size_t(limits_.max_connections)) {
        // The caller holding the most gives one up, if it holds more than this one's.
        auto most = per_key.end();
        for (auto it = per_key.begin(); it != per_key.end(); ++it) {
          if (!it->first.empty() && (most == per_key.end() || it->second > most->second)) most = it;
        }
        int mine = per_key.count(c.key) ? per_key[c.key] : 0;
        // (A copy of the key: dropping its last connection erases it from per_key.)
        if (most == per_key.end() || most->second <= mine + 1 ||
            !drop_oldest_waiting(std::string(most->first))) {
          RefuseAtOnce(fd, 503, "gpumuxd has too many open connections; try again");
          continue;
        }
      }
      ++per_key[c.key];
      c.deadline = Clock::now() + std::chrono::milliseconds(limits_.request_deadline_ms);
      connections.emplace(next_id++, std::move(c));
    }
  };
  // Reads what has arrived; hands a complete request to the workers. False: the client is gone.
  auto read_from = [&](uint64_t id, Connection& c) {
    char buf[8192];
    bool closed = false;
    for (;;) {
      ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return false;
      if (n == 0) {  // the client closed its side: a complete request is still answered
        closed = true;
        break;
      }
      c.in.append(buf, size_t(n));
      if (c.in.size() > kMaxHeadBytes + kMaxBodyBytes + 4) break;  // the parser refuses it below
    }
    if (closed && c.in.empty()) return false;
    HttpMessage message;
    ParseResult parsed = ParseHttpMessage(c.in, &message);
    if (parsed.status == ParseStatus::kIncomplete) return !closed;
    std::string why = parsed.error;
    if (parsed.status == ParseStatus::kComplete && ToRequest(message, &c.request, &why)) {
      c.in.clear();
      c.state = Connection::State::kHandling;
      workers.Submit(id, c.request);
    } else {
      respond(c, ErrorAnswer(parsed.http_status ? parsed.http_status : 400, why));
    }
    return true;
  };
  // Sends what it can of the answer. False: done or the client is gone.
  auto write_to = [&](Connection& c) {
    while (c.written < c.out.size()) {
      ssize_t n = c.descriptor ? SendWithDescriptor(c.fd, std::string_view(c.out).substr(c.written),
                                                    *c.descriptor)
                               : send(c.fd, c.out.data() + c.written, c.out.size() - c.written,
                                      MSG_NOSIGNAL);
      if (n > 0) c.descriptor = nullptr;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      c.written += size_t(n);
    }
    return false;
  };

  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;  // the connection of fds[listeners_.size() + 1 + k]
  while (!stopped_.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    for (const Listener& l : listeners_) fds.push_back({l.fd, POLLIN, 0});
    auto now = Clock::now();
    auto next_deadline = now + std::chrono::milliseconds(200);  // wakes to notice Stop() regardless
    for (auto& [id, c] : connections) {
      if (c.state == Connection::State::kHandling) continue;
      fds.push_back({c.fd, short(c.state == Connection::State::kReading ? POLLIN : POLLOUT), 0});
      ids.push_back(id);
      next_deadline = std::min(next_deadline, c.deadline);
    }
    int wait_ms =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - now).count()) + 1;
    if (poll(fds.data(), fds.size(), std::max(wait_ms, 0)) < 0 && errno != EINTR) break;

    if (fds[0].revents & POLLIN) {
      char drain[256];
      while (read(wake_[0], drain, sizeof(drain)) > 0) {
      }
    }
    for (auto& [id, response] : workers.TakeAnswers()) {
      auto it = connections.find(id);
      if (it != connections.end()) respond(it->second, response);
    }
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (fds[1 + i].revents & POLLIN) accept_from(listeners_[i]);
    }
    for (size_t k = 0; k < ids.size(); ++k) {
      const pollfd& p = fds[1 + listeners_.size() + k];
      auto it = connections.find(ids[k]);
      if (it == connections.end() || p.revents == 0) continue;
      Connection& c = it->second;
      bool keep = c.state == Connection::State::kReading ? read_from(ids[k], c) : write_to(c);
      if (!keep) close_connection(it);
    }
    // Deadlines: a request that is not complete in time is answered 408; an answer the client
    // does not take in time is dropped.
    now = Clock::now();
    for (auto it = connections.begin(); it != connections.end();) {
      Connection& c = it->second;
      if (c.state == Connection::State::kReading && now >= c.deadline) {
        respond(c, ErrorAnswer(408, "request not complete within " +
                                        std::to_string(limits_.request_deadline_ms) + " ms"));
        if (!write_to(c)) {
          it = close_connection(it);
          continue;
        }
      } else if (c.state == Connection::State::kWriting && now >= c.deadline) {
        it = close_connection(it);
        continue;
      }
      ++it;
    }
  }
  for (auto it = connections.begin(); it != connections.end();) it = close_connection(it);
}

}  // namespace gpumux::service

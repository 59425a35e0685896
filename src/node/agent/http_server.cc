#include "node/agent/http_server.h"

#include "base/error.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace gpumux::agent {
namespace {

constexpr size_t kMaxRequestBytes = 1 << 20;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw Unavailable(path + ": socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    default: return status >= 500 ? "Internal Server Error" : "Unknown";
  }
}

// Reads one HTTP message (head and a Content-Length body) from `fd`; false on a malformed or
// oversized one. `head` gets the start line and headers, lower-cased names.
bool ReadMessage(int fd, std::string* start_line, std::map<std::string, std::string>* headers, std::string* body) {
  std::string data;
  char buf[4096];
  size_t head_end;
  while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || data.size() > kMaxRequestBytes) return false;
    data.append(buf, size_t(n));
  }
  std::istringstream head(data.substr(0, head_end));
  std::getline(head, *start_line);
  if (!start_line->empty() && start_line->back() == '\r') start_line->pop_back();
  std::string line;
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = char(std::tolower(c));
    size_t value = line.find_first_not_of(' ', colon + 1);
    (*headers)[name] = value == std::string::npos ? "" : line.substr(value);
  }
  size_t length = 0;
  if (auto it = headers->find("content-length"); it != headers->end()) length = std::strtoull(it->second.c_str(), nullptr, 10);
  if (length > kMaxRequestBytes) return false;
  *body = data.substr(head_end + 4);
  while (body->size() < length) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    body->append(buf, size_t(n));
  }
  body->resize(length);
  return true;
}

std::string Format(const HttpResponse& r) {
  std::ostringstream out;
  out << "HTTP/1.1 " << r.status << ' ' << Reason(r.status) << "\r\nContent-Type: " << r.content_type
      << "\r\nContent-Length: " << r.body.size() << "\r\nConnection: close\r\n\r\n" << r.body;
  return out.str();
}

}  // namespace

HttpServer::~HttpServer() {
  for (auto [fd, is_unix] : listeners_) close(fd);
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
}

void HttpServer::ListenUnix(const std::string& path) {
  sockaddr_un addr = UnixAddress(path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Unavailable(Errno("socket"));
  unlink(path.c_str());  // a stale socket of a previous run
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0) {
    std::string why = Errno(path);
    close(fd);
    throw Unavailable(why);
  }
  chmod(path.c_str(), 0666);
  listeners_.push_back({fd, true});
  unix_path_ = path;
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
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0) {
    std::string why = Errno(address);
    if (fd >= 0) close(fd);
    throw Unavailable(why);
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  tcp_port_ = ntohs(addr.sin_port);
  listeners_.push_back({fd, false});
}

void HttpServer::Serve(const std::function<HttpResponse(const HttpRequest&)>& handler) {
  std::vector<pollfd> fds;
  for (auto [fd, is_unix] : listeners_) fds.push_back({fd, POLLIN, 0});
  while (!stopped_.load()) {
    if (poll(fds.data(), fds.size(), 200) <= 0) continue;  // wakes to notice Stop()
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      int client = accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      timeval timeout{5, 0};  // a stuck client cannot hold the agent
      setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      Answer(client, listeners_[i].second, handler);
      close(client);
    }
  }
}

void HttpServer::Answer(int fd, bool unix_socket, const std::function<HttpResponse(const HttpRequest&)>& handler) {
  std::string start;
  std::map<std::string, std::string> headers;
  HttpRequest request;
  if (!ReadMessage(fd, &start, &headers, &request.body)) {
    WriteAll(fd, Format({413, "{\"error\": \"malformed or oversized request\"}"}));
    return;
  }
  std::istringstream words(start);
  std::string target;
  words >> request.method >> target;
  request.path = target.substr(0, target.find('?'));
  if (unix_socket) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      request.has_credentials = true;
      request.uid = cred.uid;
      request.gid = cred.gid;
      request.pid = cred.pid;
    }
  }
  HttpResponse response;
  try {
    response = handler(request);
  } catch (const std::exception& e) {
    response = {500, std::string("{\"error\": \"internal error\"}")};
  }
  WriteAll(fd, Format(response));
}

std::pair<int, std::string> CallUnix(const std::string& socket_path, const std::string& method, const std::string& path,
                                     const std::string& body) {
  sockaddr_un addr = UnixAddress(socket_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Unavailable(Errno("socket"));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string why = Errno("cannot reach gpumuxd at " + socket_path);
    close(fd);
    throw Unavailable(why);
  }
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::ostringstream req;
  req << method << ' ' << path << " HTTP/1.1\r\nHost: gpumuxd\r\nContent-Type: application/json\r\nContent-Length: "
      << body.size() << "\r\nConnection: close\r\n\r\n" << body;
  std::string start, response_body;
  std::map<std::string, std::string> headers;
  bool ok = WriteAll(fd, req.str()) && ReadMessage(fd, &start, &headers, &response_body);
  close(fd);
  if (!ok) throw Unavailable("gpumuxd at " + socket_path + " gave no answer");
  int status = 0;
  std::istringstream(start.substr(start.find(' ') + 1)) >> status;
  return {status, response_body};
}

}  // namespace gpumux::agent

#include "node/agent/http_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "base/error.h"
#include "node/agent/http_request.h"

namespace gpumux::agent {

sockaddr_un UnixSocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw Unavailable(path + ": socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

std::pair<int, std::string> CallUnix(const std::string& socket_path, const std::string& method,
                                     const std::string& path, const std::string& body) {
  sockaddr_un addr = UnixSocketAddress(socket_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Unavailable(std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string why = "cannot reach gpumuxd at " + socket_path + ": " + std::strerror(errno);
    close(fd);
    throw Unavailable(why);
  }
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::ostringstream request;
  request << method << ' ' << path
          << " HTTP/1.1\r\nHost: gpumuxd\r\nContent-Type: application/json\r\n"
          << "Content-Length: " << body.size() << "\r\nConnection: close\r\n\r\n"
          << body;
  std::string out = request.str(), in;
  bool sent = true;
  for (size_t off = 0; off < out.size() && sent;) {
    ssize_t n = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    sent = n > 0;
    off += sent ? size_t(n) : 0;
  }
  HttpMessage answer;
  ParseResult parsed;
  char buf[8192];
  while (sent && (parsed = ParseHttpMessage(in, &answer)).status == ParseStatus::kIncomplete) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, size_t(n));
  }
  close(fd);
  if (!sent || parsed.status != ParseStatus::kComplete) {
    throw Unavailable("gpumuxd at " + socket_path + " gave no answer to " + method + " " + path);
  }
  int status = 0;
  std::istringstream(answer.start_line.substr(answer.start_line.find(' ') + 1)) >> status;
  return {status, answer.body};
}

}  // namespace gpumux::agent

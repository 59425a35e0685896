#include "service/http_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "base/error.h"
#include "service/http_request.h"

namespace gpumux::service {

sockaddr_un UnixSocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw Unavailable(path + ": socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

namespace {

// A connected stream socket to `address` (see CallHttp), with 10 s send and receive timeouts.
int Connect(const std::string& address) {
  const bool is_unix = address.rfind("unix:", 0) == 0 || address.rfind('/', 0) == 0;
  int fd = -1;
  if (is_unix) {
    sockaddr_un addr = UnixSocketAddress(address.substr(address[0] == '/' ? 0 : 5));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Unavailable(std::string("socket: ") + std::strerror(errno));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      std::string why = "cannot reach " + address + ": " + std::strerror(errno);
      close(fd);
      throw Unavailable(why);
    }
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) throw BadInput(address + ": expected HOST:PORT or unix:PATH");
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    std::string host = address.substr(0, colon), port = address.substr(colon + 1);
    if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      throw Unavailable("cannot resolve " + address + ": " + gai_strerror(rc));
    }
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
      }
    }
    freeaddrinfo(found);
    if (fd < 0) throw Unavailable("cannot reach " + address + ": " + std::strerror(errno));
  }
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// Receives what has arrived on `fd`, as recv(); a descriptor sent with it goes to `*descriptor`
// (the first; any other, or one that finds `*descriptor` taken, is closed).
ssize_t ReceiveKeepingDescriptor(int fd, char* buf, size_t size, int* descriptor) {
  iovec io{buf, size};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    for (size_t k = 0; CMSG_LEN((k + 1) * sizeof(int)) <= c->cmsg_len; ++k) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
      if (*descriptor < 0) {
        *descriptor = received;
      } else {
        close(received);
      }
    }
  }
  return n;
}

// CallHttp, taking a descriptor sent with the answer (CallUnix).
std::pair<int, std::string> Call(const std::string& address, const std::string& method,
                                 const std::string& path, const std::string& body,
                                 const std::string& content_type, int* descriptor) {
  int fd = Connect(address);
  std::ostringstream request;
  request << method << ' ' << path << " HTTP/1.1\r\nHost: "
          << (address.rfind("unix:", 0) == 0 || address[0] == '/' ? "localhost" : address)
          << "\r\nContent-Type: " << content_type << "\r\nContent-Length: " << body.size()
          << "\r\nConnection: close\r\n\r\n"
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
  int received = -1;
  while (sent && (parsed = ParseHttpMessage(in, &answer)).status == ParseStatus::kIncomplete) {
    ssize_t n = ReceiveKeepingDescriptor(fd, buf, sizeof(buf), &received);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, size_t(n));
  }
  close(fd);
  if (!sent || parsed.status != ParseStatus::kComplete) {
    if (received >= 0) close(received);
    throw Unavailable(address + " gave no answer to " + method + " " + path);
  }
  if (descriptor) {
    *descriptor = received;
  } else if (received >= 0) {
    close(received);
  }
  int status = 0;
  std::istringstream(answer.start_line.substr(answer.start_line.find(' ') + 1)) >> status;
  return {status, answer.body};
}

}  // namespace

std::pair<int, std::string> CallUnix(const std::string& socket_path, const std::string& method,
                                     const std::string& path, const std::string& body,
                                     int* descriptor) {
  return Call("unix:" + socket_path, method, path, body, "application/json", descriptor);
}

std::pair<int, std::string> CallHttp(const std::string& address, const std::string& method,
                                     const std::string& path, const std::string& body,
                                     const std::string& content_type) {
  return Call(address, method, path, body, content_type, nullptr);
}

}  // namespace gpumux::service

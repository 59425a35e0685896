// The client side of gpumuxd's API transport: one request over its Unix socket. For AgentClient,
// the SPANK plugin, the Kubernetes integration and the tests.
#pragma once

#include <sys/un.h>

#include <string>
#include <utility>

namespace gpumux::service {

// The address of the Unix socket at `path`, for either end. Throws Error (unavailable) for a path
// too long for a socket address.
sockaddr_un UnixSocketAddress(const std::string& path);

// Sends one request to a gpumuxd Unix socket and returns (status, body), waiting up to 10 s for
// the answer. A descriptor gpumuxd sends with the answer goes to `*descriptor` (the caller owns
// it; -1 if none came), or is closed where `descriptor` is null. Throws Error (unavailable) if the
// agent cannot be reached or gives no answer.
std::pair<int, std::string> CallUnix(const std::string& socket_path, const std::string& method,
                                     const std::string& path, const std::string& body = "",
                                     int* descriptor = nullptr);

// The same over any stream socket: `address` is "unix:PATH" (or an absolute PATH) or "HOST:PORT"
// (TCP). For the Kubernetes API server through `kubectl proxy`, and the tests' fake of it.
// Throws Error (unavailable) when nothing answers, (bad input) for an address of neither form.
std::pair<int, std::string> CallHttp(const std::string& address, const std::string& method,
                                     const std::string& path, const std::string& body = "",
                                     const std::string& content_type = "application/json");

}  // namespace gpumux::service

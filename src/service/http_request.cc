#include "service/http_request.h"

#include <unistd.h>

#include <algorithm>
#include <string_view>

#include <sstream>

namespace gpumux::service {
namespace {

ParseResult Malformed(std::string why, int status = 400) {
  return {ParseStatus::kMalformed, std::move(why), status};
}

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Printable ASCII and tabs: what a start line or header value may hold here.
bool IsPrintable(std::string_view s) {
  for (char c : s) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<const int> PassDescriptor(int fd) {
  if (fd < 0) return nullptr;
  return std::shared_ptr<const int>(new int(fd), [](const int* owned) {
    close(*owned);
    delete owned;
  });
}

ParseResult ParseHttpMessage(std::string_view data, HttpMessage* message) {
  size_t head_end = data.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (data.size() > kMaxHeadBytes) {
      return {ParseStatus::kTooLarge,
              "request head over " + std::to_string(kMaxHeadBytes) + " bytes", 431};
    }
    return {};
  }
  if (head_end > kMaxHeadBytes) {
    return {ParseStatus::kTooLarge, "request head over " + std::to_string(kMaxHeadBytes) + " bytes",
            431};
  }
  std::string_view head = data.substr(0, head_end);
  size_t line_end = head.find("\r\n");
  message->start_line = std::string(head.substr(0, line_end));
  if (message->start_line.empty()) return Malformed("empty start line");
  if (!IsPrintable(message->start_line)) return Malformed("control characters in the start line");
  message->headers.clear();
  while (line_end != std::string_view::npos) {
    size_t next = head.find("\r\n", line_end + 2);
    std::string_view line =
        head.substr(line_end + 2,
                    next == std::string_view::npos ? std::string_view::npos : next - line_end - 2);
    line_end = next;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Malformed("header line without a name: '" + std::string(line.substr(0, 40)) + "'");
    }
    std::string name;
    for (char c : line.substr(0, colon)) {
      if (!IsTokenChar(c)) return Malformed("bad character in a header name");
      name += char(std::tolower(static_cast<unsigned char>(c)));
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (!IsPrintable(value)) return Malformed("control characters in header '" + name + "'");
    auto [it, inserted] = message->headers.emplace(name, std::string(value));
    if (!inserted && name == "content-length" && it->second != value) {
      return Malformed("two different Content-Length headers");
    }
  }
  if (message->headers.count("transfer-encoding")) {
    return Malformed("Transfer-Encoding is not supported; send a Content-Length", 411);
  }
  size_t length = 0;
  if (auto it = message->headers.find("content-length"); it != message->headers.end()) {
    const std::string& v = it->second;
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      return Malformed("Content-Length '" + v.substr(0, 20) + "' is not a number of bytes");
    }
    length = std::stoull(v);
    if (length > kMaxBodyBytes) {
      return {ParseStatus::kTooLarge,
              "body of " + v + " bytes, more than " + std::to_string(kMaxBodyBytes), 413};
    }
  }
  size_t body_start = head_end + 4;
  if (data.size() - body_start < length) return {};
  message->body = std::string(data.substr(body_start, length));
  return {ParseStatus::kComplete, "", 0};
}

bool ToRequest(const HttpMessage& message, HttpRequest* request, std::string* error) {
  const std::string& line = message.start_line;
  size_t first = line.find(' '), last = line.rfind(' ');
  if (first == std::string::npos || first == last) {
    *error = "start line is not 'METHOD /PATH HTTP/1.1'";
    return false;
  }
  std::string method = line.substr(0, first), target = line.substr(first + 1, last - first - 1);
  std::string version = line.substr(last + 1);
  if (method.empty() || method.size() > 16 ||
      method.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos) {
    *error = "method '" + method.substr(0, 16) + "' is not an HTTP method";
    return false;
  }
  if (target.empty() || target[0] != '/' || target.find(' ') != std::string::npos) {
    *error = "request target must be a path starting with '/'";
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    *error = "version '" + version.substr(0, 16) + "' is not HTTP/1.0 or HTTP/1.1";
    return false;
  }
  request->method = method;
  request->path = target.substr(0, target.find('?'));
  request->query = target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
  request->body = message.body;
  return true;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

std::string FormatResponse(const HttpResponse& r, size_t chunk_over) {
  std::ostringstream out;
  out << "HTTP/1.1 " << r.status << ' ' << ReasonPhrase(r.status)
      << "\r\nContent-Type: " << r.content_type << "\r\n";
  if (chunk_over == 0 || r.body.size() <= chunk_over) {
    out << "Content-Length: " << r.body.size() << "\r\nConnection: close\r\n\r\n" << r.body;
    return out.str();
  }
  out << "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" << std::hex;
  for (size_t at = 0; at < r.body.size(); at += chunk_over) {
    size_t n = std::min(chunk_over, r.body.size() - at);
    out << n << "\r\n" << std::string_view(r.body).substr(at, n) << "\r\n";
  }
  out << "0\r\n\r\n";
  return out.str();
}

}  // namespace gpumux::service

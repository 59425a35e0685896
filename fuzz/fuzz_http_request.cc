// The HTTP request parser gpumuxd reads every connection with (service/http_request.h).
#include <cstdint>
#include <string>
#include <string_view>

#include "service/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpumux::service;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  HttpMessage message;
  ParseResult r = ParseHttpMessage(input, &message);
  if (r.status == ParseStatus::kComplete) {
    HttpRequest request;
    std::string error;
    if (ToRequest(message, &request, &error) && request.path.empty()) __builtin_trap();
    if (message.body.size() > kMaxBodyBytes) __builtin_trap();
  } else if (r.status != ParseStatus::kIncomplete && (r.http_status < 400 || r.error.empty())) {
    __builtin_trap();  // every refusal has a 4xx status and a reason
  }
  return 0;
}

#include "service/http_request.h"

#include <gtest/gtest.h>

namespace gpumux::service {
namespace {

ParseResult Parse(const std::string& data, HttpMessage* m = nullptr) {
  HttpMessage local;
  return ParseHttpMessage(data, m ? m : &local);
}

TEST(HttpRequest, ACompleteRequestAndEveryPrefixOfIt) {
  std::string data =
      "POST /v1/tenants?x=1 HTTP/1.1\r\nHost: gpumuxd\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
  for (size_t n = 0; n < data.size(); ++n) {
    EXPECT_EQ(Parse(data.substr(0, n)).status, ParseStatus::kIncomplete) << n;
  }
  HttpMessage m;
  ASSERT_EQ(Parse(data, &m).status, ParseStatus::kComplete);
  EXPECT_EQ(m.headers["host"], "gpumuxd");
  HttpRequest r;
  std::string error;
  ASSERT_TRUE(ToRequest(m, &r, &error)) << error;
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/tenants");
  EXPECT_EQ(r.body, "{\"a\":1}");
}

TEST(HttpRequest, MalformedIs400AndOversizedIs413Or431) {
  auto status = [](const std::string& data) { return Parse(data).http_status; };
  EXPECT_EQ(status("GET / HTTP/1.1\r\nno colon here\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nbad name: x\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n"), 400);
  EXPECT_EQ(status("\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n"), 413);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: " + std::string(kMaxHeadBytes, 'a')), 431);
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nX: " + std::string(kMaxHeadBytes, 'a')).status,
            ParseStatus::kTooLarge);

  for (const char* line :
       {"GET", "GET /", "get / HTTP/1.1", "GET v1 HTTP/1.1", "GET / HTTP/2", "GET  / HTTP/1.1"}) {
    HttpMessage m;
    ASSERT_EQ(Parse(std::string(line) + "\r\n\r\n", &m).status, ParseStatus::kComplete) << line;
    HttpRequest r;
    std::string error;
    EXPECT_FALSE(ToRequest(m, &r, &error)) << line;
    EXPECT_FALSE(error.empty()) << line;
  }
}

TEST(HttpRequest, ResponsesCarryTheirReasonPhrase) {
  EXPECT_EQ(FormatResponse({404, "{}"}).substr(0, 24), "HTTP/1.1 404 Not Found\r\n");
  for (int status : {200, 201, 400, 403, 404, 405, 408, 409, 411, 413, 429, 431, 500, 503}) {
    EXPECT_STRNE(ReasonPhrase(status), "Unknown") << status;
  }
}

}  // namespace
}  // namespace gpumux::service

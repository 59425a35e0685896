// The body of a Kubernetes watch, parsed as it streams in: one JSON event per line ({"type":
// ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, "object"}), lines arriving in pieces of any size.
// Whatever the API server (or anything between) sends, Feed never throws: a line that is not a
// JSON object is skipped; an ERROR event ends the stream, as 410 Gone (`expired`) or as a failure
// that says what came.
//
// Not thread-safe: one stream, one reader.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

class WatchStream {
 public:
  // `event` gets each event that is not an ERROR; returning false ends the stream.
  explicit WatchStream(std::function<bool(const nlohmann::json&)> event, size_t max_line)
      : event_(std::move(event)), max_line_(max_line) {}

  // Takes the next piece of the body. False: the stream is over (an ERROR event, `event` said
  // so, or a line longer than `max_line`).
  bool Feed(std::string_view piece);

  bool expired() const { return expired_; }                // ERROR with code 410
  const std::string& failure() const { return failure_; }  // another ERROR, or a line too long

 private:
  std::function<bool(const nlohmann::json&)> event_;
  size_t max_line_;
  std::string pending_;
  bool expired_ = false;
  std::string failure_;
};

}  // namespace gpumux::k8s

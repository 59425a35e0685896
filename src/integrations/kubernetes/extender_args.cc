#include "integrations/kubernetes/extender_args.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace gpumux::k8s {

namespace {

bool SameKey(std::string_view key, std::string_view lower) {
  return key.size() == lower.size() &&
         std::equal(key.begin(), key.end(), lower.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

// A member as a JSON value (the pod, or full nodes: a few per body), whatever its type; the
// caller says what it expected.
nlohmann::json JsonOf(simdjson::ondemand::value value) {
  std::string_view text;
  switch (value.type()) {
    case simdjson::ondemand::json_type::object: {
      simdjson::ondemand::object object = value.get_object();
      text = object.raw_json();
      break;
    }
    case simdjson::ondemand::json_type::array: {
      simdjson::ondemand::array array = value.get_array();
      text = array.raw_json();
      break;
    }
    default: text = value.raw_json_token();
  }
  return nlohmann::json::parse(text);
}

}  // namespace

ExtenderArgs ExtenderArgs::Parse(std::string_view body) {
  ExtenderArgs args;
  // One parser per thread: it keeps its buffers between bodies.
  thread_local simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  try {
    simdjson::ondemand::document doc = parser.iterate(padded);
    if (doc.type() != simdjson::ondemand::json_type::object)  // (says only what it begins with)
      throw BadInput(nlohmann::json::accept(body) ? "expected ExtenderArgs, a JSON object"
                                                  : "the body is not JSON");
    for (simdjson::ondemand::field field : doc.get_object()) {
      std::string_view key = field.unescaped_key();
      simdjson::ondemand::value value = field.value();
      if (SameKey(key, "pod")) {
        args.pod = JsonOf(value);
      } else if (SameKey(key, "nodes")) {
        args.nodes = JsonOf(value);
      } else if (SameKey(key, "nodenames")) {
        args.node_names.clear();
        args.has_node_names = !value.is_null();
        if (!args.has_node_names) continue;
        if (value.type() != simdjson::ondemand::json_type::array)
          throw BadInput("NodeNames: expected a list of node names (or Nodes)");
        for (simdjson::ondemand::value name : value.get_array()) {
          if (name.type() != simdjson::ondemand::json_type::string)
            throw BadInput("NodeNames: expected strings, got " +
                           std::string(name.raw_json_token()));
          args.node_names.emplace_back(std::string_view(name.get_string()));
        }
      }
    }
  } catch (const simdjson::simdjson_error& e) {
    throw BadInput(std::string("the body is not JSON: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw BadInput(std::string("the body is not JSON: ") + e.what());
  }
  return args;
}

}  // namespace gpumux::k8s

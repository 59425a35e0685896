// The one error type for bad user input (a catalog or plan file, a flag, an unknown name).
// what() is a complete message for a person: where (file:line and field when known), what, and why.
// The command-line front end prints it and exits with code 2.
#pragma once

#include <stdexcept>

namespace gpumux {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gpumux

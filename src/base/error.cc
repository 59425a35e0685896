#include "base/error.h"

namespace gpumux {

Error Error::Within(std::string_view context) const {
  return Error(code_, std::string(context) + ": " + what());
}

int ExitCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadInput:
    case ErrorCode::kNotFound:
    case ErrorCode::kPermissionDenied: return 2;
    case ErrorCode::kDoesNotFit:
    case ErrorCode::kConflict: return 3;
    case ErrorCode::kUnavailable: return 4;
    case ErrorCode::kInternal: return 1;
  }
  return 1;
}

int HttpStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadInput: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kDoesNotFit:
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

ErrorCode ErrorCodeForHttpStatus(int status) {
  switch (status) {
    case 400:
    case 405:
    case 411:
    case 413:
    case 414:
    case 431: return ErrorCode::kBadInput;
    case 403: return ErrorCode::kPermissionDenied;
    case 404: return ErrorCode::kNotFound;
    case 409: return ErrorCode::kConflict;
    case 503: return ErrorCode::kUnavailable;
    default: return ErrorCode::kInternal;
  }
}

}  // namespace gpumux

// One running instance per resource (gpumuxd per runtime directory and per socket): an exclusive
// flock on a lock file that nobody else can open.
//
// flock() needs only a descriptor, and any descriptor will do: a lock file others may read is a
// lock others may take, and a user who waits on it gets it the moment the instance exits, keeping
// its successor from ever starting. So the file is mode 0600, owned by the caller, a regular file
// with one name; a file at the path that is anything else (left by an older gpumuxd that made it
// 0644, or placed there by someone else) may be open in another user's process and is replaced —
// unless a live instance of the same program and user holds it, which is a conflict. Thread-safe;
// for a program's start, not a hot path.
#pragma once

#include <string>

namespace gpumux {

// Takes the lock at `path` for the life of the process (the descriptor stays open, close-on-exec)
// and writes the caller's pid there. `what` names the resource in messages; `program` is the
// process name (/proc/PID/comm) an earlier holder must have to be believed a live instance. Throws
// Error (conflict) naming the holder's pid when one holds it, Error (unavailable) when the file
// cannot be made.
void LockInstance(const std::string& path, const std::string& what, const std::string& program);

}  // namespace gpumux

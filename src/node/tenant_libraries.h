// The libraries gpumux puts into tenants' processes — the shim (libgpumux.so) and the simulated
// driver under simgpu/ — copied into a node folder that tenants' containers mount, so that a
// gpumuxd running from an image (deploy/kubernetes) hands them files of the node, not of its own
// container. `gpumux install-shim DIR` runs it (the DaemonSets' init container); gpumuxd's
// --tenant-libraries DIR then names DIR in every tenant's environment.
#pragma once

#include <string>
#include <vector>

namespace gpumux::node {

// Copies libgpumux.so and every file of simgpu/ from `from_dir` (node::RuntimeLibraryDir()) into
// `to_dir` (made, 0755, with its parents, if missing). Each file is replaced whole: written beside its target, then
// renamed over it, so a process that mapped the old one keeps it and one starting meanwhile loads
// the old or the new, never a part of one; a file already the same is left alone. Returns the
// paths it replaced or made. Throws Error (bad input) when `to_dir` or a folder in it is a link,
// or another user than the caller and root owns it or may write it (whoever could would choose
// what every tenant loads); Error (unavailable) when a file cannot be read or written.
std::vector<std::string> InstallTenantLibraries(const std::string& from_dir,
                                                const std::string& to_dir);

// Whether `dir` holds a shim (libgpumux.so); for gpumuxd's --tenant-libraries.
bool HoldsTenantLibraries(const std::string& dir);

}  // namespace gpumux::node

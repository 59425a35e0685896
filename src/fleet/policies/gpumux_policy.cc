// gpumux's own policy (placeholder until tuned: FGD with exact scores).
#include "fleet/policy.h"

namespace gpumux::fleet {

std::unique_ptr<Policy> MakeGpumuxPolicy(const TargetWorkload& target) { return MakeFgdPolicy(target); }

}  // namespace gpumux::fleet

// A plan file (`gpumux plan FILE.yaml`), and, when it loads, its node plan (what gpumuxd would
// take).
#include <cstdint>

#include "core/catalog.h"
#include "fuzz_support.h"
#include "share/node_plan.h"
#include "share/plan_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpumux::Catalog catalog = gpumux::Catalog::LoadBundled();
  std::string path = gpumux::fuzz::InputFile(data, size, ".yaml");
  gpumux::fuzz::RefusesOnlyWithError([&] {
    gpumux::PlanFile file = gpumux::LoadPlanFile(path, catalog);
    int tenants = 0;
    for (const gpumux::TenantClass& c : file.input.classes) tenants += c.count;
    if (tenants <= 6) {  // planning is a search; small inputs keep each run short
      gpumux::Plan plan = gpumux::PlanFleet(file.input);
      gpumux::MakeNodePlan(file.input, plan);
    }
  });
  return 0;
}

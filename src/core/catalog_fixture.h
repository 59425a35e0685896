// A GoogleTest fixture with the bundled catalog loaded and the H100 SXM5 at hand, for the tests of
// the demand model and the strategies.
#pragma once

#include <gtest/gtest.h>

#include "core/catalog.h"

namespace gpumux {

class CatalogFixture : public ::testing::Test {
 protected:
  Catalog catalog_ = Catalog::LoadBundled();
  const GpuKind& h100_ = catalog_.FindGpu("H100-SXM5-80GB");
};

}  // namespace gpumux

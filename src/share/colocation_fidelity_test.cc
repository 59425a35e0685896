#include "share/colocation_fidelity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace gpumux {
namespace {

using Half = ColocationMeasurement::Half;

const std::string kMeasurements =
    std::string(GPUMUX_SOURCE_DIR) + "/bench/fidelity/colocation.csv";

// The claim of docs/calibration.md: with the model's constants, which are the fit of the fit half,
// the check half's median |error| in each copy's slowdown is within 15%.
TEST(ColocationFidelity, OnTheCheckHalfTheMedianSlowdownErrorIsWithinFifteenPercent) {
  std::vector<ColocationMeasurement> rows = ReadColocationMeasurements(kMeasurements);
  ASSERT_GE(rows.size(), 16u);
  ErrorSummary check = SummariseColocation(rows, Half::kCheck, ColocationConstants{});
  EXPECT_GE(check.rows, 8u);
  EXPECT_LE(check.median_abs, 0.15);
  // The fitted terms earn it: read SM Active as kernel time, and let a context hand the GPU on at
  // every gap, and the check half misses by far more.
  ErrorSummary plain = SummariseColocation(rows, Half::kCheck, ColocationConstants{1.0, 1.0});
  EXPECT_GT(plain.median_abs, 2 * check.median_abs);
}

TEST(ColocationFidelity, TheModelsConstantsAreTheFitOfTheFitHalf) {
  std::vector<ColocationMeasurement> rows = ReadColocationMeasurements(kMeasurements);
  ColocationConstants fitted = FitColocation(rows);
  EXPECT_NEAR(fitted.sm_active_to_busy, kSmActiveToBusy, 0.005);
  EXPECT_NEAR(fitted.timeslice_hold, kTimeSliceHold, 0.01);
}

// Each mode's prediction moves the way the measurements do: more copies, a larger slowdown each;
// time-slicing slows a copy more than MPS does.
TEST(ColocationFidelity, MoreCopiesSlowEachMoreAndTakingTurnsCostsMoreThanRunningTogether) {
  ColocationMeasurement m;
  m.solo_busy = 0.2;
  double before_mps = 1, before_ts = 1;
  for (int copies = 2; copies <= 6; ++copies) {
    m.copies = copies;
    m.mode = ShareMode::kMps;
    double mps = PredictColocationSlowdown(m, {});
    m.mode = ShareMode::kTimeSlice;
    double ts = PredictColocationSlowdown(m, {});
    EXPECT_GT(mps, before_mps) << copies;
    EXPECT_GT(ts, before_ts) << copies;
    EXPECT_GT(ts, mps) << copies;
    EXPECT_LT(mps, copies) << "they use a fifth of the GPU each: MPS overlaps them";
    before_mps = mps, before_ts = ts;
  }
}

TEST(ColocationFidelity, ARowThatDoesNotReadIsRefusedNamingItsLineAndField) {
  std::string path =
      (std::filesystem::temp_directory_path() / "gpumux_colocation_bad.csv").string();
  auto refuses = [&](const std::string& row, const std::string& says) {
    std::ofstream(path) << "# comment\n"
                           "id,half,gpu,mode,copies,solo_busy,busy_metric,measured_speedup,"
                           "source,notes\n"
                        << row << "\n";
    try {
      ReadColocationMeasurements(path);
      ADD_FAILURE() << "accepted " << row;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refuses("a,fit,H100,mps,2,0.2,sm_active,fast,src,n", ":3: measured_speedup: 'fast'");
  refuses("a,fit,H100,mig,2,0.2,sm_active,1.5,src,n", ":3: mode: 'mig'");
  refuses("a,fit,H100,mps,1,0.2,sm_active,1.5,src,n", ":3: copies: '1'");
  refuses("a,fit,H100,mps,2,1.2,sm_active,1.5,src,n", ":3: solo_busy: '1.2'");
  refuses("a,maybe,H100,mps,2,0.2,sm_active,1.5,src,n", ":3: half: 'maybe'");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gpumux

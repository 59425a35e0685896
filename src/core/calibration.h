// What `gpumux calibrate` measured on one GPU, kept in a JSON file: which GPU (its catalog kind,
// and the device and driver as the driver named them), when, and each figure. `explain` and `plan`
// use the calibration of a GPU kind when given one (--calibration FILE): its achieved bandwidth and
// math rate stand for the efficiencies a workload does not state, its time-sliced figures for the
// time left after context switches, and its MPS figures for what MPS clients move together.
// Plain data; the measuring is node/calibration_probe.h.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace gpumux {

struct GpuCalibration {
  std::string gpu;            // catalog kind ("H100-SXM5-80GB")
  std::string device_name;    // as the driver reports it
  std::string driver;         // driver version, as cuDriverGetVersion reports it
  std::string date;           // UTC, ISO 8601
  bool simulated = false;     // measured on gpumux's simulated GPU
  double bandwidth = 0;       // achieved HBM bytes/s of a streaming kernel
  double flops = 0;           // achieved FLOP/s of a math kernel (bf16 tensor math on a real GPU)
  double launch_seconds = 0;  // per kernel launch, launched back to back
  double sync_seconds = 0;    // one launch and its synchronisation, round trip
  // n → the share of the GPU's time n processes streaming at once get together (time-sliced), as a
  // fraction of what one gets alone; n from 2.
  std::map<int, double> timeslice_usable;
  // n → the same for n processes streaming at once under MPS (clients of one control daemon);
  // empty when not measured (a real GPU without a daemon running).
  std::map<int, double> mps_usable;
};

// A calibration and the file it was read from.
struct CalibrationFile {
  std::string path;
  GpuCalibration figures;
};

// Reads a calibration file. Throws Error (bad input) naming the file and the field for anything
// missing, of the wrong type or out of range.
GpuCalibration LoadCalibration(const std::string& path);
// The same from JSON already parsed (gpumuxd's answer to GET /v1/gpus carries each GPU's); `where`
// names the source in errors.
GpuCalibration CalibrationFromJson(const nlohmann::json& j, const std::string& where);
// The file's JSON.
nlohmann::json CalibrationToJson(const GpuCalibration& c);
// Writes it (replacing the file whole). Throws Error (unavailable) when it cannot.
void SaveCalibration(const GpuCalibration& c, const std::string& path);
// A node's calibrations of its real GPUs, one file per GPU kind (KIND.json): where `gpumux calibrate
// --gpu` writes when not told a file, and where explain, plan and gpumuxd look when not told one.
// $GPUMUX_CALIBRATION_DIR, else /var/lib/gpumux/calibrations.
std::string CalibrationDir();
// The calibrations in `dir` (files ending .json, in name order), those of simulated GPUs only if
// `simulated_too` (gpumuxd matches each to its devices; explain and plan would take a simulated
// one for the real kind); none if `dir` does not exist. Throws Error (bad input) naming a file
// there that does not read as a calibration.
std::vector<CalibrationFile> LoadCalibrationDir(const std::string& dir, bool simulated_too);

// "calibration FILE: H100-SXM5-80GB (simulated), 2026-12-05T01:02:03Z" for reports.
std::string DescribeCalibration(const GpuCalibration& c, const std::string& path);

}  // namespace gpumux

// The catalog of GPU kinds and model shapes: loaded from YAML, validated as a whole, looked up by
// name.
//
// Loading is strict: a missing, unknown or badly-typed field, an impossible MIG placement, a
// profile larger than its GPU or a model whose published parameter count disagrees with its shape
// throws Error (bad input) naming file, line and field. Nothing is defaulted silently. A Catalog is
// immutable after loading and safe to share between threads.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine_profile.h"
#include "core/gpu_kind.h"
#include "core/model_shape.h"

namespace gpumux {

class Catalog {
 public:
  // The catalog bundled with gpumux: $GPUMUX_CATALOG_DIR if set, else the source tree's catalog/.
  static Catalog LoadBundled();
  static std::string BundledDir();

  // Adds the entries of one file, which may hold `gpus:`, `models:` and/or `engines:` lists. A name
  // or alias that is already taken is refused (a user file cannot silently replace a bundled kind).
  void AddFile(const std::string& path);

  // Case-insensitive lookup by name or alias; '-', '_' and spaces are ignored. Unknown names throw
  // Error (bad input) listing the nearest known names.
  const GpuKind& FindGpu(std::string_view name) const;
  // Attaches `c` to the GPU kind it names (core/calibration.h). Throws Error (bad input) for a kind
  // the catalog does not have.
  void Calibrate(const GpuCalibration& c);
  const ModelShape& FindModel(std::string_view name) const;
  // An engine class by its name or an engine's ("vllm"); throws as FindGpu does.
  const EngineProfile& FindEngine(std::string_view name) const;

  const std::vector<GpuKind>& gpus() const { return gpus_; }
  const std::vector<ModelShape>& models() const { return models_; }
  const std::vector<EngineProfile>& engines() const { return engines_; }

 private:
  void AddGpu(GpuKind gpu);
  void AddModel(ModelShape model);
  void AddEngine(EngineProfile engine);

  std::vector<GpuKind> gpus_;
  std::vector<ModelShape> models_;
  std::map<std::string, size_t> gpu_index_;  // normalised name or alias -> index
  std::map<std::string, size_t> model_index_;
  std::vector<EngineProfile> engines_;
  std::map<std::string, size_t> engine_index_;
};

// Lower-case, without '-', '_', '.' or spaces: "H100-SXM5_80GB" -> "h100sxm580gb".
std::string NormaliseName(std::string_view name);

// Up to `limit` candidates closest to `name` by edit distance on normalised names, best first.
std::vector<std::string> NearestNames(std::string_view name,
                                      const std::vector<std::string>& candidates, size_t limit = 3);

}  // namespace gpumux

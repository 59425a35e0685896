#include "fleet/curves_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "base/error.h"

namespace gpumux::fleet {
namespace {

std::ofstream Open(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw BadInput(fmt::format("{}: cannot write the file", path));
  return out;
}

}  // namespace

void WriteCurvesCsv(const std::string& path, const std::vector<PolicyCurves>& curves, int max_pct) {
  std::ofstream out = Open(path);
  out << "policy,arrived_pct,seeds,allocation_pct_mean,allocation_pct_sd,unallocated_pct_mean,"
         "unallocated_pct_sd,frag_capacity_pct_mean,frag_capacity_pct_sd,frag_idle_pct_mean,"
         "frag_idle_pct_sd,failed_pods_mean,failed_pods_sd\n";
  for (const PolicyCurves& c : curves) {
    for (int x = 0; x <= max_pct; ++x) {
      Stat alloc = At(c, x, &CurvePoint::allocation_pct);
      if (std::isnan(alloc.mean)) continue;
      Stat un = At(c, x, &CurvePoint::unallocated_pct);
      Stat fc = At(c, x, &CurvePoint::frag_capacity_pct);
      Stat fi = At(c, x, &CurvePoint::frag_idle_pct);
      Stat fp = At(c, x, &CurvePoint::failed_pods);
      out << fmt::format(
          "{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.2f},{:.2f}\n",
          c.policy, x, c.per_seed.size(), alloc.mean, alloc.sd, un.mean, un.sd, fc.mean, fc.sd,
          fi.mean, fi.sd, fp.mean, fp.sd);
    }
  }
  if (!out) throw BadInput(fmt::format("{}: write failed", path));
}

void WriteUnallocatedSvg(const std::string& path, const std::vector<PolicyCurves>& curves,
                         int max_pct, const std::string& title) {
  constexpr double kW = 760, kH = 460, kLeft = 60, kRight = 150, kTop = 40, kBottom = 50;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  // The interesting part starts where the first policies fall behind: plot from 50% arrived.
  const int xmin = std::min(50, max_pct);
  double ymax = 0;
  for (const PolicyCurves& c : curves) {
    for (int x = xmin; x <= max_pct; ++x) {
      Stat s = At(c, x, &CurvePoint::unallocated_pct);
      if (!std::isnan(s.mean)) ymax = std::max(ymax, s.mean);
    }
  }
  double step = 1;
  for (double candidate : {1.0, 2.0, 5.0, 10.0, 20.0, 25.0}) {
    step = candidate;
    if (ymax / candidate <= 10) break;
  }
  ymax = std::max(step, std::ceil(ymax / step) * step);
  auto px = [&](double x) { return kLeft + pw * (x - xmin) / std::max(1, max_pct - xmin); };
  auto py = [&](double y) { return kTop + ph * (1 - std::min(y, ymax) / ymax); };
  static const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

  std::ofstream out = Open(path);
  out << fmt::format(
             R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)svg",
             kW, kH)
      << "\n";
  out << fmt::format(R"svg(<rect width="{}" height="{}" fill="white"/>)svg", kW, kH) << "\n";
  out << fmt::format(R"svg(<text x="{}" y="22" font-size="14">{}</text>)svg", kLeft, title) << "\n";
  for (int x = xmin; x <= max_pct; x += 10) {
    out << fmt::format(
               R"svg(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#ddd"/><text x="{0}" y="{3}" text-anchor="middle">{4}</text>)svg",
               px(x), kTop, kTop + ph, kTop + ph + 16, x)
        << "\n";
  }
  for (double y = 0; y <= ymax + 1e-9; y += step) {
    out << fmt::format(
               R"svg(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#ddd"/><text x="{3}" y="{4}" text-anchor="end">{5:g}</text>)svg",
               kLeft, py(y), kLeft + pw, kLeft - 6, py(y) + 4, y)
        << "\n";
  }
  out << fmt::format(
             R"svg(<text x="{}" y="{}" text-anchor="middle">arrived GPU request (% of capacity)</text>)svg",
             kLeft + pw / 2, kH - 10)
      << "\n";
  out << fmt::format(
             R"svg(<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">unallocated GPU (%)</text>)svg",
             kTop + ph / 2)
      << "\n";
  for (size_t i = 0; i < curves.size(); ++i) {
    std::string points;
    for (int x = xmin; x <= max_pct; ++x) {
      Stat s = At(curves[i], x, &CurvePoint::unallocated_pct);
      if (!std::isnan(s.mean)) points += fmt::format("{:.1f},{:.1f} ", px(x), py(s.mean));
    }
    const char* colour = kColours[i % 8];
    out << fmt::format(R"svg(<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>)svg",
                       colour, points)
        << "\n";
    double ly = kTop + 10 + 20 * double(i);
    out << fmt::format(
               R"svg(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="{3}" stroke-width="3"/><text x="{4}" y="{5}">{6}</text>)svg",
               kLeft + pw + 15, ly, kLeft + pw + 40, colour, kLeft + pw + 46, ly + 4,
               curves[i].policy)
        << "\n";
  }
  out << "</svg>\n";
  if (!out) throw BadInput(fmt::format("{}: write failed", path));
}

}  // namespace gpumux::fleet

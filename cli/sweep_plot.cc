// strata sweep --plot: the sweep's points as a LinePlot, drawn by
// strata-plot (gui/, Qt), so that this executable needs no Qt.
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "commands.h"
#include "sweep.h"

namespace strata::cli {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string o;
  for (const auto& s : v) o += (o.empty() ? "" : ", ") + s;
  return o;
}

// A swept key in words, for axis labels and legends (the values keep their
// units: "1.6GB/s"); a key not listed here reads as its dotted path.
std::string Words(const std::string& key) {
  static const std::pair<const char*, const char*> kWords[] = {
      {"zero_optimization.offload_param.device", "parameters on"},
      {"zero_optimization.offload_optimizer.device", "optimizer states on"},
      {"zero_optimization.offload_optimizer.ratio", "optimizer share offloaded"},
      {"zero_optimization.stage", "ZeRO stage"},
      {"zero_optimization.offload_param.buffer_count", "parameter swap buffers"},
      {"zero_optimization.offload_param.buffer_size", "parameter swap buffer (elements)"},
      {"zero_optimization.offload_optimizer.buffer_count", "optimizer swap buffers"},
      {"zero_optimization.stage3_prefetch_bucket_size", "prefetch bucket (elements)"},
      {"zero_optimization.stage3_max_live_parameters", "live parameters (elements)"},
      {"zero_optimization.reduce_bucket_size", "reduce bucket (elements)"},
      {"zero_optimization.sub_group_size", "optimizer sub-group (elements)"},
      {"hardware.nvme.read_bandwidth", "NVMe read bandwidth"},
      {"hardware.nvme.write_bandwidth", "NVMe write bandwidth"},
      {"hardware.nvme.drives", "NVMe drives"},
      {"hardware.pcie.bandwidth", "PCIe bandwidth"},
      {"hardware.network.bandwidth", "network bandwidth"},
      {"hardware.network.nics", "NICs per node"},
      {"zero_optimization.zero_hpz_partition_size", "hpZ group"},
      {"zero_optimization.zero_quantized_weights", "qwZ"},
      {"zero_optimization.zero_quantized_gradients", "qgZ"},
      {"policy.host_hooks", "hooks' host time"},
      {"hardware.nodes", "nodes"},
      {"hardware.gpus_per_node", "GPUs per node"},
      {"hardware.gpu.memory", "GPU memory"},
      {"hardware.cpu.memory", "CPU memory"},
      {"training.micro_batch_size", "micro batch"},
      {"training.gradient_accumulation_steps", "accumulation steps"},
      {"model.layers", "layers"},
      {"model.hidden_size", "hidden size"},
      {"model.seq_length", "sequence length"},
      {"policy.gpu_cache", "GPU parameter cache"},
      {"policy.cpu_cache", "CPU parameter cache"},
      {"policy.eviction", "eviction policy"},
  };
  for (const auto& [k, w] : kWords)
    if (key == k) return w;
  return key;
}

// "parameters on cpu", "micro batch 4": a key's words and its value.
std::string Setting(const std::string& key, const std::string& value) { return Words(key) + " " + value; }

std::string ValueOf(const Point& p, const std::string& key) {
  for (const auto& [k, v] : p.settings)
    if (k == key) return v;
  return {};
}

}  // namespace

std::vector<std::string> PlotColumns() {
  std::vector<std::string> names;
  for (const auto& c : ResultColumns())
    if (c.get) names.push_back(c.name);
  return names;
}

Status CheckPlotRequest(const PlotRequest& r, const std::vector<std::string>& keys) {
  auto swept = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  if (!swept(r.x))
    return Status::InvalidArgument("--plot: X '" + r.x + "' is not a swept key (--set/--zip: " + Join(keys) + ")");
  for (const auto& h : r.hue) {
    if (!swept(h))
      return Status::InvalidArgument("--hue '" + h + "' is not a swept key (--set/--zip: " + Join(keys) + ")");
    if (h == r.x) return Status::InvalidArgument("--hue '" + h + "' is X already");
  }
  const auto cols = PlotColumns();
  if (std::find(cols.begin(), cols.end(), r.y) == cols.end())
    return Status::InvalidArgument("--plot: Y '" + r.y + "' is not a result column (one of " + Join(cols) + ")");
  const std::string ext = r.out.size() >= 4 ? r.out.substr(r.out.size() - 4) : "";
  if (ext != ".png" && ext != ".svg")
    return Status::InvalidArgument("--plot: OUT '" + r.out + "' should end in .png or .svg");
  return Status::Ok();
}

namespace {

// The keys zipped with `key` (--zip): neither X nor a hue, varying, each
// value a function of key's, in the points' key order.
std::vector<std::string> Following(const PlotRequest& r, const std::vector<const Point*>& ok, const std::string& key) {
  std::vector<std::string> out;
  if (ok.empty()) return out;
  for (const auto& [k, unused] : ok.front()->settings) {
    if (k == r.x || std::find(r.hue.begin(), r.hue.end(), k) != r.hue.end()) continue;
    std::map<std::string, std::string> of_key;
    bool linked = true, varies = false;
    for (const Point* p : ok) {
      auto [it, fresh] = of_key.emplace(ValueOf(*p, key), ValueOf(*p, k));
      linked = linked && (fresh || it->second == ValueOf(*p, k));
      varies = varies || ValueOf(*p, k) != ValueOf(*ok.front(), k);
    }
    if (linked && varies) out.push_back(k);
  }
  return out;
}

}  // namespace

Result<LinePlot> BuildSweepPlot(const PlotRequest& r, const std::vector<Point>& points) {
  const auto& cols = ResultColumns();
  const ResultColumn& col =
      *std::find_if(cols.begin(), cols.end(), [&](const ResultColumn& c) { return c.name == r.y; });
  std::vector<const Point*> ok;
  for (const auto& p : points)
    if (p.error.empty()) ok.push_back(&p);
  // X: numbers in base units when every value has one, else categories in
  // sweep order.
  bool numeric = true;
  std::vector<std::string> categories;
  for (const Point* p : ok) {
    const std::string v = ValueOf(*p, r.x);
    numeric = numeric && config::SetValueNumber(v).has_value();
    if (std::find(categories.begin(), categories.end(), v) == categories.end()) categories.push_back(v);
  }
  auto x_of = [&](const Point& p) {
    const std::string v = ValueOf(p, r.x);
    return numeric ? *config::SetValueNumber(v)
                   : static_cast<double>(std::find(categories.begin(), categories.end(), v) - categories.begin());
  };
  LinePlot plot;
  plot.title = (ok.empty() ? std::string() : ok.front()->scenario_name) + ": " + col.label;
  // X, and the keys zipped with it (their value is a function of X's and
  // varies): "hardware.nvme.read_bandwidth (with write_bandwidth 1GB/s .. 16GB/s)".
  plot.x_label = Words(r.x);
  for (const std::string& k : Following(r, ok, r.x)) {
    // Its range, smallest to largest value (in sweep order for words).
    std::string lo = ValueOf(*ok.front(), k), hi = ValueOf(*ok.back(), k);
    std::optional<double> vlo, vhi;
    for (const Point* p : ok)
      if (const auto v = config::SetValueNumber(ValueOf(*p, k))) {
        if (!vlo || *v < *vlo) vlo = *v, lo = ValueOf(*p, k);
        if (!vhi || *v > *vhi) vhi = *v, hi = ValueOf(*p, k);
      }
    plot.x_label += " (with " + Words(k) + " " + lo + " .. " + hi + ")";
  }
  plot.y_label = col.label;
  plot.y_unit = col.unit;
  // One series per hue value, in sweep order. With two hue keys or more, the
  // first key's value picks the colour and the second's the line style.
  std::map<std::string, size_t> index;
  std::vector<std::vector<std::string>> seen(r.hue.size());  // per hue key: its values in order
  auto rank = [&](size_t h, const std::string& v) {
    auto& vs = seen[h];
    auto it = std::find(vs.begin(), vs.end(), v);
    if (it != vs.end()) return static_cast<int>(it - vs.begin());
    vs.push_back(v);
    return static_cast<int>(vs.size()) - 1;
  };
  // Per hue key, the keys zipped with it: named beside it in the legend.
  std::vector<std::vector<std::string>> partners;
  for (const std::string& h : r.hue) partners.push_back(Following(r, ok, h));
  for (const Point* p : ok) {
    std::string name;
    for (size_t h = 0; h < r.hue.size(); ++h) {
      name += (name.empty() ? "" : ", ") + Setting(r.hue[h], ValueOf(*p, r.hue[h]));
      for (const std::string& k : partners[h]) name += ", " + Setting(k, ValueOf(*p, k));
    }
    auto [it, fresh] = index.emplace(name, plot.series.size());
    if (fresh) {
      PlotSeries series{name, {}};
      if (r.hue.size() >= 2) {
        series.color = rank(0, ValueOf(*p, r.hue[0]));
        series.dash = rank(1, ValueOf(*p, r.hue[1])) % 4;
      }
      plot.series.push_back(std::move(series));
    }
    PlotSeries& s = plot.series[it->second];
    // Two points at one X on one line: another key varies; name it.
    const double x = x_of(*p);
    for (const PlotPoint& q : s.points)
      if (q.x == x) {
        std::vector<std::string> others;
        for (const auto& [k, v] : p->settings)
          if (k != r.x && std::find(r.hue.begin(), r.hue.end(), k) == r.hue.end()) others.push_back(k);
        return Status::InvalidArgument("--plot: two points of one line at " + r.x + "=" + ValueOf(*p, r.x) + ": " +
                                       Join(others) + " also varies; sweep it with one value, or name it with --hue");
      }
    PlotPoint pt;
    pt.x = x;
    pt.label = ValueOf(*p, r.x);
    pt.has_y = p->feasible || !col.speed;
    if (pt.has_y) pt.y = col.get(p->summary);
    s.points.push_back(pt);
  }
  for (auto& s : plot.series)
    std::sort(s.points.begin(), s.points.end(), [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
  // A geometric sweep (a:b:*2) reads best on a log axis: at least three
  // distinct positive values with one ratio between neighbours.
  std::vector<double> xs;
  for (const auto& s : plot.series)
    for (const auto& pt : s.points) xs.push_back(pt.x);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  if (numeric && xs.size() >= 3 && xs.front() > 0) {
    const double ratio = xs[1] / xs[0];
    bool geometric = ratio >= 1.5;
    for (size_t i = 2; i < xs.size() && geometric; ++i) geometric = std::abs(xs[i] / xs[i - 1] / ratio - 1) < 0.01;
    plot.x_log = geometric;
  }
  return plot;
}

Status DrawSweepPlot(const LinePlot& plot, const std::string& out) {
  const auto dot = out.find_last_of('.');
  const std::string data = out.substr(0, dot) + ".plot.json";
  if (Status st = WriteFile(data, LinePlotJson(plot)); !st.ok()) return st;
  // strata-plot beside this executable (installed), in the build tree's
  // gui/ (cli/strata), or on PATH.
  std::string tool = "strata-plot";
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    const std::string dir = std::string(self, static_cast<size_t>(n)).substr(0, std::string(self, n).find_last_of('/'));
    for (const std::string& c : {dir + "/strata-plot", dir + "/../gui/strata-plot"})
      if (access(c.c_str(), X_OK) == 0) {
        tool = c;
        break;
      }
  }
  const pid_t pid = fork();
  if (pid < 0) return Status::IOError(std::string("fork for strata-plot: ") + std::strerror(errno));
  if (pid == 0) {
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
    execlp(tool.c_str(), tool.c_str(), data.c_str(), out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0)
    return Status::IOError(std::string("waiting for strata-plot: ") + std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return Status::IOError(
        "--plot needs strata-plot, built with the GUI (Qt6); not found beside this executable or "
        "on PATH. The plot's data is in " +
        data + "; draw it later with strata-plot " + data + " " + out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::IOError("strata-plot failed drawing " + out + " from " + data);
  return Status::Ok();
}

}  // namespace strata::cli

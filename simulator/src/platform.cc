#include "platform.h"

#include <set>
#include <string>
#include <utility>

namespace strata::sim {
namespace {

using Dir = sg4::LinkInRoute::Direction;

void Route(sg4::NetZone* z, sg4::Host* a, sg4::Host* b, std::vector<sg4::LinkInRoute> links) {
  z->add_route(a->get_netpoint(), b->get_netpoint(), nullptr, nullptr, links, /*symmetrical=*/false);
}

}  // namespace

Platform::Platform(const HardwareSpec& hw, const std::vector<int>& ranks, const std::vector<CommGroup>& groups)
    : gpn_(hw.gpus_per_node), ranks_(ranks), groups_(groups) {
  auto* zone = sg4::create_full_zone("strata");
  first_node_ = Node(ranks_.front());
  const int last_node = Node(ranks_.back());
  const double gpu_speed = hw.gpu.peak_flops.flops_per_s * hw.gpu.efficiency;
  std::vector<sg4::SplitDuplexLink*> net;
  for (int n = first_node_; n <= last_node; ++n) {
    const std::string p = "node" + std::to_string(n) + ".";
    cpu_.push_back(zone->create_host(p + "cpu", hw.cpu.memory_bandwidth.bytes_per_s));
    nvme_.push_back(zone->create_host(p + "nvme", 1.0));
    // The node's drives striped together: their rates add up (RAID-0 with
    // requests spread evenly over the drives, as large swaps are).
    auto* rd = zone->create_link(p + "nvme_read", hw.nvme.node_read().bytes_per_s)->set_latency(0);
    auto* wr = zone->create_link(p + "nvme_write", hw.nvme.node_write().bytes_per_s)->set_latency(0);
    if (hw.nvme.readwrite_bandwidth.bytes_per_s > 0) {
      // Drives whose reads and writes share a rate: both directions also cross it.
      auto* rw = zone->create_link(p + "nvme_rw", hw.nvme.node_readwrite().bytes_per_s)->set_latency(0);
      Route(zone, nvme_.back(), cpu_.back(), {sg4::LinkInRoute(rd), sg4::LinkInRoute(rw)});
      Route(zone, cpu_.back(), nvme_.back(), {sg4::LinkInRoute(wr), sg4::LinkInRoute(rw)});
    } else {
      Route(zone, nvme_.back(), cpu_.back(), {sg4::LinkInRoute(rd)});
      Route(zone, cpu_.back(), nvme_.back(), {sg4::LinkInRoute(wr)});
    }
    net.push_back(zone->create_split_duplex_link(p + "net", hw.node_network().bytes_per_s));  // all NICs
    net.back()->set_latency(0);
    net_out_.push_back(zone->create_host(p + "net_out", 1.0));
    net_in_.push_back(zone->create_host(p + "net_in", 1.0));
  }
  // PCIe above the GPUs' own links: a switch uplink per gpus_per_switch
  // GPUs, and the host's root ports shared by every switch of the node
  // (each level split-duplex: UP carries host-to-device).
  std::vector<sg4::SplitDuplexLink*> host_link;
  std::vector<sg4::SplitDuplexLink*> switch_link;  // by global switch index - first simulated switch
  const int gps = hw.pcie.gpus_per_switch > 0 && hw.pcie.switch_bandwidth.bytes_per_s > 0 ? hw.pcie.gpus_per_switch : 0;
  if (hw.pcie.host_bandwidth.bytes_per_s > 0)
    for (int n = first_node_; n <= last_node; ++n) {
      host_link.push_back(zone->create_split_duplex_link("node" + std::to_string(n) + ".pcie_host",
                                                         hw.pcie.host_bandwidth.bytes_per_s));
      host_link.back()->set_latency(0);
    }
  auto switch_of = [&](int r) { return Node(r) * CeilDiv(gpn_, gps) + (r % gpn_) / gps; };
  if (gps > 0)
    for (int sw = switch_of(ranks_.front()); sw <= switch_of(ranks_.back()); ++sw) {
      switch_link.push_back(zone->create_split_duplex_link("switch" + std::to_string(sw) + ".pcie",
                                                           hw.pcie.switch_bandwidth.bytes_per_s));
      switch_link.back()->set_latency(0);
    }
  // The route from the host to rank r's GPU (dir UP) or back (DOWN): its
  // own link, its switch's uplink, the host's ports.
  auto host_route = [&](int r, sg4::SplitDuplexLink* own, Dir dir) {
    std::vector<sg4::LinkInRoute> links{{own, dir}};
    if (gps > 0) links.emplace_back(switch_link[switch_of(r) - switch_of(ranks_.front())], dir);
    if (!host_link.empty()) links.emplace_back(host_link[Node(r) - first_node_], dir);
    return links;
  };
  std::vector<sg4::SplitDuplexLink*> pcie, nvlink;
  for (int r : ranks_) {
    const std::string p = "rank" + std::to_string(r) + ".";
    gpu_.push_back(zone->create_host(p + "gpu", gpu_speed));
    pcie.push_back(zone->create_split_duplex_link(p + "pcie", hw.pcie.bandwidth.bytes_per_s));
    pcie.back()->set_latency(0);
    if (hw.nvlink.bandwidth.bytes_per_s > 0) {
      nvlink.push_back(zone->create_split_duplex_link(p + "nvlink", hw.nvlink.bandwidth.bytes_per_s));
      nvlink.back()->set_latency(0);
    }
    // PCIe: UP carries host-to-device, DOWN device-to-host.
    Route(zone, cpu(r), gpu(r), host_route(r, pcie.back(), Dir::UP));
    Route(zone, gpu(r), cpu(r), host_route(r, pcie.back(), Dir::DOWN));
  }
  // Ring hops of every group's rings (each pair once: a pair can be a hop
  // of two kinds of group).
  std::set<std::pair<int, int>> routed;  // (from rank, to rank); -1: the node's network exit or entry
  for (const CommGroup& g : groups_) {
    if (g.size() <= 1) continue;
    for (int r : ranks_) {
      const int next = g.Next(r);
      const int i = Local(r);
      if (routed.insert({r, simulated(next) ? next : -1}).second) {
        if (simulated(next) && Node(next) == Node(r)) {
          const int j = Local(next);
          if (!nvlink.empty()) {
            Route(zone, gpu(r), gpu(next), {{nvlink[i], Dir::UP}, {nvlink[j], Dir::DOWN}});
          } else {  // peer traffic through the host: D2H on the sender, H2D on the receiver
            std::vector<sg4::LinkInRoute> links = host_route(r, pcie[i], Dir::DOWN);
            for (const auto& l : host_route(next, pcie[j], Dir::UP)) links.push_back(l);
            Route(zone, gpu(r), gpu(next), links);
          }
        } else if (simulated(next)) {
          Route(zone, gpu(r), gpu(next),
                {{net[Node(r) - first_node_], Dir::UP}, {net[Node(next) - first_node_], Dir::DOWN}});
        } else {
          Route(zone, gpu(r), net_out_[Node(r) - first_node_], {{net[Node(r) - first_node_], Dir::UP}});
        }
      }
      if (!simulated(g.Prev(r)) && routed.insert({-1, r}).second)
        Route(zone, net_in_[Node(r) - first_node_], gpu(r), {{net[Node(r) - first_node_], Dir::DOWN}});
    }
  }
  delay_ = zone->create_host("delay", 1.0)->set_core_count(1 << 30);
  zone->seal();
}

sg4::Host* Platform::ring_next(int rank, int g) const {
  const int next = groups_[static_cast<size_t>(g)].Next(rank);
  return simulated(next) ? gpu(next) : net_out_[Node(rank) - first_node_];
}

sg4::Host* Platform::ring_prev_outside(int rank, int g) const {
  const int prev = groups_[static_cast<size_t>(g)].Prev(rank);
  return simulated(prev) ? nullptr : net_in_[Node(rank) - first_node_];
}

}  // namespace strata::sim

#include "platform.h"

#include <set>
#include <string>
#include <utility>

#include "strata/cost/op_cost.h"

namespace strata::sim {
namespace {

using Dir = sg4::LinkInRoute::Direction;

void Route(sg4::NetZone* z, sg4::Host* a, sg4::Host* b, std::vector<sg4::LinkInRoute> links) {
  z->add_route(a->get_netpoint(), b->get_netpoint(), nullptr, nullptr, links, /*symmetrical=*/false);
}

}  // namespace

Platform::Platform(const HardwareSpec& hw, const std::vector<int>& ranks, const std::vector<CommGroup>& groups,
                   const std::vector<std::pair<int, int>>& peers, bool work_as_flows)
    : gpn_(hw.gpus_per_node), ranks_(ranks), groups_(groups) {
  auto* zone = sg4::create_full_zone("strata");
  local_.assign(static_cast<size_t>(ranks_.back()) + 1, -1);
  node_index_.assign(static_cast<size_t>(Node(ranks_.back())) + 1, -1);
  std::vector<int> nodes;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    local_[static_cast<size_t>(ranks_[i])] = static_cast<int>(i);
    if (nodes.empty() || nodes.back() != Node(ranks_[i])) {
      node_index_[static_cast<size_t>(Node(ranks_[i]))] = static_cast<int>(nodes.size());
      nodes.push_back(Node(ranks_[i]));
    }
  }
  const double gpu_speed = hw.gpu.peak_flops.flops_per_s * hw.gpu.efficiency;
  std::vector<sg4::SplitDuplexLink*> net;
  for (int n : nodes) {
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
  std::vector<sg4::SplitDuplexLink*> switch_link;  // by switch_of below
  const int gps = hw.pcie.gpus_per_switch > 0 && hw.pcie.switch_bandwidth.bytes_per_s > 0 ? hw.pcie.gpus_per_switch : 0;
  if (hw.pcie.host_bandwidth.bytes_per_s > 0)
    for (int n : nodes) {
      host_link.push_back(zone->create_split_duplex_link("node" + std::to_string(n) + ".pcie_host",
                                                         hw.pcie.host_bandwidth.bytes_per_s));
      host_link.back()->set_latency(0);
    }
  // Switches by node: index (simulated node index) x switches per node + the switch in its node.
  const int per_node = gps > 0 ? static_cast<int>(CeilDiv(gpn_, gps)) : 0;
  auto switch_of = [&](int r) { return NodeIndex(r) * per_node + (r % gpn_) / gps; };
  if (gps > 0)
    for (int n : nodes)
      for (int k = 0; k < per_node; ++k) {
        switch_link.push_back(zone->create_split_duplex_link("switch" + std::to_string(n * per_node + k) + ".pcie",
                                                             hw.pcie.switch_bandwidth.bytes_per_s));
        switch_link.back()->set_latency(0);
      }
  // The route from the host to rank r's GPU (dir UP) or back (DOWN): its
  // own link, its switch's uplink, the host's ports.
  auto host_route = [&](int r, sg4::SplitDuplexLink* own, Dir dir) {
    std::vector<sg4::LinkInRoute> links{{own, dir}};
    if (gps > 0) links.emplace_back(switch_link[static_cast<size_t>(switch_of(r))], dir);
    if (!host_link.empty()) links.emplace_back(host_link[static_cast<size_t>(NodeIndex(r))], dir);
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
  // Ring hops of every group's rings and the point-to-point pairs (each
  // pair once: a pair can be a hop of two kinds of group).
  std::set<std::pair<int, int>> routed;  // (from rank, to rank); -1: the node's network exit or entry
  auto gpu_to_gpu = [&](int r, int next) {
    const int i = Local(r), j = Local(next);
    if (Node(next) == Node(r)) {
      if (!nvlink.empty()) {
        Route(zone, gpu(r), gpu(next), {{nvlink[i], Dir::UP}, {nvlink[j], Dir::DOWN}});
      } else {  // peer traffic through the host: D2H on the sender, H2D on the receiver
        std::vector<sg4::LinkInRoute> links = host_route(r, pcie[i], Dir::DOWN);
        for (const auto& l : host_route(next, pcie[j], Dir::UP)) links.push_back(l);
        Route(zone, gpu(r), gpu(next), links);
      }
    } else {
      Route(zone, gpu(r), gpu(next), {{net[NodeIndex(r)], Dir::UP}, {net[NodeIndex(next)], Dir::DOWN}});
    }
  };
  for (const CommGroup& g : groups_) {
    if (g.size() <= 1 || g.name == "pp") continue;  // the pipeline's pairs are `peers`
    for (int r : ranks_) {
      const int next = g.Next(r);
      if (routed.insert({r, simulated(next) ? next : -1}).second) {
        if (simulated(next))
          gpu_to_gpu(r, next);
        else
          Route(zone, gpu(r), net_out_[NodeIndex(r)], {{net[NodeIndex(r)], Dir::UP}});
      }
      if (!simulated(g.Prev(r)) && routed.insert({-1, r}).second)
        Route(zone, net_in_[NodeIndex(r)], gpu(r), {{net[NodeIndex(r)], Dir::DOWN}});
    }
  }
  for (const auto& [from, to] : peers)
    if (from != to && simulated(from) && simulated(to) && routed.insert({from, to}).second) gpu_to_gpu(from, to);
  if (work_as_flows) {
    // A flow of W over a link of speed S alone takes W / S, and concurrent
    // ones share S max-min fairly: what an exec of W flops on a one-core
    // host of speed S does (the same LMM solver). One sink host for all:
    // the full zone's route table is hosts x hosts.
    sink_ = zone->create_host("work_sink", 1.0);
    for (int r : ranks_) {
      auto* l = zone->create_link("rank" + std::to_string(r) + ".compute", gpu_speed)->set_latency(0);
      Route(zone, gpu(r), sink_, {sg4::LinkInRoute(l)});
    }
    std::vector<sg4::Link*> memory;
    for (size_t i = 0; i < nodes.size(); ++i) {
      memory.push_back(
          zone->create_link("node" + std::to_string(nodes[i]) + ".cpu_memory", hw.cpu.memory_bandwidth.bytes_per_s)
              ->set_latency(0));
      Route(zone, cpu_[i], sink_, {sg4::LinkInRoute(memory.back())});
    }
    // One pageable copy's staging cannot go faster than the thread that
    // copies it (Replay::StageOrTransfer bounds the exec the same way): the
    // unused reverse route sink -> GPU carries it, so no host is added.
    if (const double stage = hw.cpu.staging_bandwidth.bytes_per_s; stage > 0)
      for (int r : ranks_) {
        auto* l =
            zone->create_link("rank" + std::to_string(r) + ".staging", kStagingTrafficPerByte * stage)->set_latency(0);
        Route(zone, sink_, gpu(r), {sg4::LinkInRoute(l), sg4::LinkInRoute(memory[static_cast<size_t>(NodeIndex(r))])});
      }
  }
  delay_ = zone->create_host("delay", 1.0)->set_core_count(1 << 30);
  zone->seal();
}

sg4::Host* Platform::ring_next(int rank, int g) const {
  const int next = groups_[static_cast<size_t>(g)].Next(rank);
  return simulated(next) ? gpu(next) : net_out_[NodeIndex(rank)];
}

sg4::Host* Platform::ring_prev_outside(int rank, int g) const {
  const int prev = groups_[static_cast<size_t>(g)].Prev(rank);
  return simulated(prev) ? nullptr : net_in_[NodeIndex(rank)];
}

}  // namespace strata::sim

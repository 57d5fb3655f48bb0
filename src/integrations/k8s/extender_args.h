// Private: reading kube-scheduler's ExtenderArgs body. The node list of 5,000 names is most of
// the body, and building a JSON document of it costs more than every decision about the pod, so
// the top-level object is split by a scanner: Pod (small) and Nodes (whose Node objects Filter
// echoes back) are parsed by nlohmann, NodeNames is read straight into strings, other members
// are only checked to be valid JSON (json::accept) and ignored, as Go's decoder ignores them.
//
//   {"Pod": {"metadata": {"name": "p", "namespace": "a", "annotations": {...}}}, "Nodes": null,
//    "NodeNames": ["n1", "n2"], "Future": 1}
//   -> Args{.pod_name = "p", .pod_namespace = "a", .names = {"n1", "n2"}, .nodes_mode = false}
//
// Errors (INVALID_ARGUMENT, a 400): "the body is not JSON (error at character 17)", "the body
// must be a JSON object (ExtenderArgs)", "Pod: not an object", "NodeNames[3]: not a string",
// "Nodes.items[0].metadata.name: missing", "neither Nodes nor NodeNames is given".
#pragma once

#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/status.h"

namespace tessera::k8s {

struct Args {
  std::string pod_name, pod_namespace;  // namespace "default" when the pod names none
  std::map<std::string, std::string, std::less<>> annotations, labels;
  bool nodes_mode = false;                    // Nodes (v1.NodeList) given, not NodeNames
  // One per node, in the order given: views into the body (plain names), into node_items, or
  // into `owned` (names that had escapes).
  std::vector<std::string_view> names;
  std::deque<std::string> owned;
  // Every name is plain (came from NodeNames without escapes, ASCII, no control characters): it
  // is its own JSON string text.
  bool names_plain = false;
  nlohmann::json node_items = nlohmann::json::array();  // Nodes mode: the items
};

// The views in Args::names may point into `body`: it must outlive the Args.
StatusOr<Args> DecodeArgs(std::string_view body);

}  // namespace tessera::k8s

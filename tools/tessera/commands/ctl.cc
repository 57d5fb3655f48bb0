// `tessera ctl`: every API area of the control plane from the shell. Flags become a request
// (method, path, JSON body); the answer is printed as a table (-o table, the default) or as the
// server's JSON (-o json). Exit 0 for a 2xx, 1 for an HTTP error or an unreachable server
// (the message is the server's), 2 for bad flags.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/daemon/api_client.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

using json = nlohmann::json;

struct CtlFlags : CtlConnection {
  // Per-verb values.
  std::string name, parent, quota, default_qos, role, tenant, node, id, file, idempotency_key, cont;
  std::string from, to;
  int64_t expires_in = 0, limit = 100, after = 0;
};

int Run(const CtlFlags& f, const std::string& area, const std::string& verb, const std::string& method,
        const std::string& target, const std::string& body = "") {
  return CtlCall(f, f.idempotency_key, area, verb, method, target, body);
}

// --quota '{"guaranteed": {...}}' as JSON (bad JSON is refused before anything is sent).
bool QuotaJson(const std::string& text, json* out) {
  *out = json::parse(text, nullptr, false);
  return !out->is_discarded() && out->is_object();
}

}  // namespace

int CtlCall(const CtlConnection& c, const std::string& idempotency_key, const std::string& area,
            const std::string& verb, const std::string& method, const std::string& target, const std::string& body) {
  const std::string command = "ctl " + area + (verb.empty() ? "" : " " + verb);
  StatusOr<std::unique_ptr<daemon::ApiClient>> client = CtlClient(c);
  if (!client.ok()) return Fail(command, client.status(), kExitBadInput);
  std::map<std::string, std::string> headers;
  if (!idempotency_key.empty()) headers["Idempotency-Key"] = idempotency_key;
  StatusOr<daemon::ApiResponse> r = (*client)->Call(method, target, body, headers);
  if (!r.ok()) return Fail(command, r.status(), kExitFailure);
  if (r->status < 200 || r->status > 299)
    return Fail(command, "HTTP " + std::to_string(r->status) + ": " + daemon::ApiError(*r), kExitFailure);
  const json answer = json::parse(r->body, nullptr, false);
  if (c.output == "json" || answer.is_discarded()) std::printf("%s\n", answer.is_discarded() ? r->body.c_str() : answer.dump(2).c_str());
  else std::printf("%s", CtlTable(area, verb, answer).c_str());
  return kExitOk;
}

int CtlGuard(const std::function<int()>& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    return Fail("ctl", std::string("internal error: ") + e.what(), kExitFailure);
  }
}

std::string QueryString(std::initializer_list<std::pair<std::string_view, std::string>> params) {
  std::string q;
  for (const auto& [key, value] : params)
    if (!value.empty()) q += (q.empty() ? "?" : "&") + std::string(key) + "=" + QueryEscape(value);
  return q;
}

// "a b" -> "a%20b" for query values.
std::string QueryEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

StatusOr<std::unique_ptr<daemon::ApiClient>> CtlClient(const CtlConnection& c, int timeout_ms) {
  TESSERA_ASSIGN_OR_RETURN(std::string token, ApiToken(c.token, c.token_file));
  std::string server = c.server;
  if (server.empty()) server = std::getenv("TESSERA_SERVER") ? std::getenv("TESSERA_SERVER") : "http://127.0.0.1:8080";
  std::string ca_file = c.ca_file;
  if (ca_file.empty() && std::getenv("TESSERA_CA_FILE")) ca_file = std::getenv("TESSERA_CA_FILE");
  daemon::ApiClientOptions options{.token = token, .timeout_ms = timeout_ms, .ca_file = ca_file};
  options.retry_budget_ms = int64_t{c.retry_budget_s} * 1000;
  return daemon::ApiClient::Create(server, std::move(options));
}

void RegisterCtl(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CtlFlags>();
  CLI::App* ctl = app.add_subcommand(
      "ctl",
      "Talk to the control plane (tessera serve): tenants, tokens, workloads, nodes, usage, invoices, anomalies, audit, events.\n"
      "Server: --server, else $TESSERA_SERVER, else http://127.0.0.1:8080. Token: --token, --token-file,\n"
      "else $TESSERA_TOKEN. https: the CA is --ca-file, else $TESSERA_CA_FILE, else the system's.\n"
      "Answers 429 and 503 are retried (503 only for GET/DELETE or with --idempotency-key) for\n"
      "--retry-budget s. Exit 0 for success, 1 for an error answer or no answer, 2 for bad flags.");
  ctl->require_subcommand(1);
  ctl->fallthrough();  // --server, --token, -o also after the area and verb
  ctl->add_option("--server", f->server, "Control plane URL, http://HOST:PORT or https://HOST[:PORT] (443)");
  ctl->add_option("--ca-file", f->ca_file, "https: PEM CA certificates to verify the server with (default: system's)");
  ctl->add_option("--token", f->token, "API token (prefer --token-file: a command line is visible to others)");
  ctl->add_option("--token-file", f->token_file, "File whose first line is the API token (not with --token)");
  ctl->add_option("-o,--output", f->output, "table or json")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  ctl->add_option("--retry-budget", f->retry_budget_s,
                  "Seconds a request keeps retrying answers 429 and 503 (waiting Retry-After, else backing "
                  "off), default 60; 0: no retries")
      ->check(CLI::Range(0, 86400));
  auto verb = [&](CLI::App* area, const std::string& name, const std::string& help) {
    CLI::App* v = area->add_subcommand(name, help);
    v->fallthrough();
    return v;
  };
  auto set = [exit_code](CLI::App* v, std::function<int()> run) { v->callback([run, exit_code] { *exit_code = CtlGuard(run); }); };

  CLI::App* tenants = ctl->add_subcommand("tenants", "Tenants and their quotas")->require_subcommand(1)->fallthrough();
  set(verb(tenants, "list", "Tenants the token may see"), [f] { return Run(*f, "tenants", "list", "GET", "/v1/tenants"); });
  CLI::App* tget = verb(tenants, "get", "One tenant with its usage now");
  tget->add_option("name", f->name, "Tenant")->required();
  set(tget, [f] { return Run(*f, "tenants", "get", "GET", "/v1/tenants/" + QueryEscape(f->name)); });
  for (const std::string v : {"create", "update"}) {
    // Each verb says what its flags do for it (update used to show create's texts).
    const bool create = v == "create";
    CLI::App* t = verb(tenants, v, create ? "Create a tenant" : "Change a tenant's parent, quota or default QoS (flags left out stay)");
    t->add_option("name", f->name, create ? "The new tenant's name" : "The tenant to change")->required();
    t->add_option("--parent", f->parent, create ? "Parent tenant (default: none, a root)" : "Move it under this tenant");
    const std::string quota =
        "as JSON: {\"guaranteed\": {\"gpu_milli\": 8000, \"gpus\": {\"A100-80GB\": 8}}, \"limit\": {...}, \"weight\": 2}";
    t->add_option("--quota", f->quota, create ? "Quota " + quota + " (default: none)" : "The new quota, replacing the old, " + quota);
    t->add_option("--default-qos", f->default_qos,
                  create ? "QoS of its workloads that name none: Guaranteed, Burstable or BestEffort (default Burstable)"
                         : "The new default QoS: Guaranteed, Burstable or BestEffort (submitted work keeps its own)");
    if (create) t->add_option("--idempotency-key", f->idempotency_key, "Retry-safe key: a retry returns the first answer");
    set(t, [f, v] {
      json body = json::object();
      if (v == "create") body["name"] = f->name;
      if (!f->parent.empty()) body["parent"] = f->parent;
      if (!f->quota.empty() && !QuotaJson(f->quota, &body["quota"]))
        return Fail("ctl tenants " + v, "--quota: not a JSON object: " + f->quota, kExitBadInput);
      if (!f->default_qos.empty()) body["default_qos"] = f->default_qos;
      return v == "create" ? Run(*f, "tenants", v, "POST", "/v1/tenants", body.dump())
                           : Run(*f, "tenants", v, "PATCH", "/v1/tenants/" + QueryEscape(f->name), body.dump());
    });
  }
  CLI::App* tdel = verb(tenants, "delete", "Delete a tenant without sub-tenants, tokens or workloads");
  tdel->add_option("name", f->name, "Tenant")->required();
  set(tdel, [f] { return Run(*f, "tenants", "delete", "DELETE", "/v1/tenants/" + QueryEscape(f->name)); });

  CLI::App* tokens = ctl->add_subcommand("tokens", "API tokens")->require_subcommand(1)->fallthrough();
  set(verb(tokens, "list", "Tokens the token may see"), [f] { return Run(*f, "tokens", "list", "GET", "/v1/tokens"); });
  CLI::App* tnew = verb(tokens, "create", "Make a token; its secret is printed once");
  tnew->add_option("--role", f->role,
                   "admin, tenant-admin, tenant-user, node-agent or viewer (read only, the whole cluster)")
      ->required();
  tnew->add_option("--tenant", f->tenant, "The tenant (tenant-admin, tenant-user)");
  tnew->add_option("--node", f->node, "node-agent: the one node it may act for (default: any node)");
  tnew->add_option("--expires-in", f->expires_in, "Seconds until it expires, > 0 (default: never)");
  set(tnew, [f, tnew] {
    json body = {{"role", f->role}};
    if (!f->tenant.empty()) body["tenant"] = f->tenant;
    if (!f->node.empty()) body["node"] = f->node;
    // 0 or less used to be dropped, which made a token that never expires.
    if (tnew->count("--expires-in") > 0 && f->expires_in <= 0)
      return Fail("ctl tokens create",
                  "--expires-in must be > 0 seconds, got " + std::to_string(f->expires_in) +
                      " (leave it out for a token that never expires)",
                  kExitBadInput);
    if (tnew->count("--expires-in") > 0) body["expires_in_s"] = f->expires_in;
    return Run(*f, "tokens", "create", "POST", "/v1/tokens", body.dump());
  });
  CLI::App* trev = verb(tokens, "revoke", "Revoke a token by id");
  trev->add_option("id", f->id, "Token id (tok_...)")->required();
  set(trev, [f] { return Run(*f, "tokens", "revoke", "DELETE", "/v1/tokens/" + QueryEscape(f->id)); });

  RegisterCtlWorkloads(ctl, f, exit_code);

  CLI::App* nodes = ctl->add_subcommand("nodes", "Nodes and their GPUs")->require_subcommand(1)->fallthrough();
  set(verb(nodes, "list", "Every node with its state and allocation"), [f] { return Run(*f, "nodes", "list", "GET", "/v1/nodes"); });
  for (const std::string v : {"get", "cordon", "uncordon", "drain"}) {
    CLI::App* n = verb(nodes, v, v == "get"        ? "One node and a map of its GPUs: per GPU a bar of its 1000 milli (a cell is 50) "
                                                     "split by share, then each share (workload, tenant, milli, "
                                                     "memory limit in MiB or the whole GPU)"
                                 : v == "drain"    ? "Cordon a node and requeue its work (admins)"
                                 : v == "cordon"   ? "Place nothing new on a node; what runs there stays (admins)"
                                                   : "Let a cordoned node take work again (admins)");
    n->add_option("name", f->name, "Node")->required();
    set(n, [f, v] {
      return v == "get" ? Run(*f, "nodes", v, "GET", "/v1/nodes/" + QueryEscape(f->name))
                        : Run(*f, "nodes", v, "POST", "/v1/nodes/" + QueryEscape(f->name) + "/" + v);
    });
  }
  CLI::App* nrm = verb(nodes, "remove", "Forget a lost node, or a cordoned one with no workload left (admins)");
  nrm->add_option("name", f->name, "Node")->required();
  set(nrm, [f] { return Run(*f, "nodes", "remove", "DELETE", "/v1/nodes/" + QueryEscape(f->name)); });

  CLI::App* usage = ctl->add_subcommand("usage", "Metered usage per tenant and hour (a tenant token: its subtree)");
  usage->fallthrough();
  usage->add_option("--tenant", f->tenant, "A tenant and its subtree (default: the token's; admins: all)");
  usage->add_option("--from", f->from, "Start: unix seconds or RFC 3339 (2026-11-01T00:00:00Z)");
  usage->add_option("--to", f->to, "End (exclusive), likewise");
  set(usage, [f] {
    return Run(*f, "usage", "", "GET", "/v1/usage" + QueryString({{"tenant", f->tenant}, {"from", f->from}, {"to", f->to}}));
  });

  CLI::App* audit = ctl->add_subcommand("audit", "The audit log (admins)")->require_subcommand(1)->fallthrough();
  CLI::App* alist = verb(audit, "list", "Records after --after, --limit at a time");
  alist->add_option("--after", f->after, "Records with seq > this")->capture_default_str();
  alist->add_option("--limit", f->limit, "1..1000")->capture_default_str();
  set(alist, [f] {
    return Run(*f, "audit", "list", "GET",
               "/v1/audit?after=" + std::to_string(f->after) + "&limit=" + std::to_string(f->limit));
  });
  // A probe answers for now: a 503 (not ready) is its answer, not one to wait out.
  set(ctl->add_subcommand("health", "The control plane's /readyz (never retried)")->fallthrough(), [f] {
    CtlFlags now = *f;
    now.retry_budget_s = 0;
    return Run(now, "health", "", "GET", "/readyz");
  });
  RegisterCtlEvents(ctl, f, exit_code);
  RegisterCtlInvoices(ctl, f, exit_code);
  RegisterCtlAnomalies(ctl, f, exit_code);
}

}  // namespace tessera::cli

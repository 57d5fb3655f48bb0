// The device plugin's NVML backstop: a real SharePlugin over the fake NVML (A100-40GB x 2,
// 40,537 MiB each; 4 shares per GPU: 10,134 MiB a share) hands out slots; the slots' processes are
// real children of the test whose /proc stand-in mountinfo has the slot's tenant file (the
// Allocate answer's host path) mounted at <container dir>/node/tenant, as the kubelet mounts it;
// DraBackstop with slot_mount judges them by SharePlugin::BackstopUses (backstop_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/integrations/k8s/container_edits.h"
#include "tessera/integrations/k8s/device_plugin.h"
#include "tessera/integrations/k8s/dra_backstop.h"
#include "tests/k8s/backstop_fixture.h"

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kContainerDir[] = "/run/tessera";
constexpr char kPodA[] = "1b2c3d4e-0000-4000-8000-00000000000a";
constexpr char kPodB[] = "1b2c3d4e-0000-4000-8000-00000000000b";
constexpr char kPodD[] = "1b2c3d4e-0000-4000-8000-00000000000d";
constexpr char kOwnPod[] = "1b2c3d4e-0000-4000-8000-0000000000ff";

// A container's mountinfo: its root, and the tenant file's bind mount as the kernel shows it (the
// root field is the host file's path within its filesystem: /var/lib is on "/" here).
std::string Mountinfo(const std::string& tenant_file, const std::string& suffix = "") {
  return "700 690 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
         "812 700 259:1 " + tenant_file + suffix + " " + TenantMountPath(kContainerDir) +
         " ro,relatime - ext4 /dev/nvme0n1p1 rw\n"
         "813 700 0:5 /null /dev/null rw,nosuid - devtmpfs udev rw,size=4096k\n";
}

TEST(SlotFileOfMountinfo, NamesTheTenantFileMountedAtTheMountPointAndNothingElse) {
  const std::string at = "/run/tessera/node/tenant";
  EXPECT_EQ(SlotFileOfMountinfo(Mountinfo("/tessera/device-plugin/tenants/GPU-aa__0"), at), "GPU-aa__0");
  // Rewritten by a restarted plugin after the container started: the mount still names it.
  EXPECT_EQ(SlotFileOfMountinfo(Mountinfo("/var/lib/tessera/tenants/GPU-aa__3", "//deleted"), at), "GPU-aa__3");
  EXPECT_EQ(SlotFileOfMountinfo("5 1 0:5 /x/with\\040space /run/tessera/node/tenant ro - ext4 /dev/x rw\n", at),
            "with space");
  EXPECT_EQ(SlotFileOfMountinfo(Mountinfo("/tessera/tenants/GPU-aa__0"), "/elsewhere/node/tenant"), std::nullopt);
  EXPECT_EQ(SlotFileOfMountinfo("700 690 0:52 / / rw - overlay overlay rw\n", at), std::nullopt);
  EXPECT_EQ(SlotFileOfMountinfo("", at), std::nullopt);
}

// The kernel separates mountinfo's fields with one ' ' and escapes only ' ', '\t', '\n' and '\\'
// in a path: a '\v', '\f' or '\r' in a root or mount point is part of it, not a separator
// (mountinfo_fuzzer found a mount point with a '\v' that was read as two fields).
TEST(SlotFileOfMountinfo, SplitsFieldsAtSpacesOnlyAsTheKernelWritesThem) {
  EXPECT_EQ(SlotFileOfMountinfo("9 1 8:1 /tenants/GPU-aa__0 /mnt/a\vb ro - ext4 /dev/sda1 rw\n", "/mnt/a\vb"),
            "GPU-aa__0");
  EXPECT_EQ(SlotFileOfMountinfo("9 1 8:1 /tenants/GPU\f\r__1 /run/t ro - ext4 /dev/sda1 rw\n", "/run/t"),
            "GPU\f\r__1");
  EXPECT_EQ(SlotFileOfMountinfo("9 1 8:1 /tenants/GPU-aa__0 /mnt/a\vb ro - ext4 /dev/sda1 rw\n", "/mnt/a"),
            std::nullopt);
}

class DevicePluginBackstopTest : public BackstopFixture {
 protected:
  void SetUp() override {
    BackstopFixture::SetUp();
    own_ = Spawn(kOwnPod);  // stands for the plugin's own process (options.own_pid)
  }
  void TearDown() override {
    plugin_.reset();
    BackstopFixture::TearDown();
  }
  // The plugin over the fake NVML's two GPUs, their share devices in devices_[gpu]. The
  // processes' list comes after (Nvml: the fake reads its configuration at the first init after
  // the last shutdown, and the plugin shuts its NVML down once it has read the GPUs).
  void Start() {
    ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB,A100-40GB", 1);
    StatusOr<std::unique_ptr<SharePlugin>> plugin =
        SharePlugin::Open({.node_dir = (root_ / "node").string(),
                           .shares_per_gpu = 4,
                           .state_dir = (root_ / "state").string(),
                           .shim_path = TESSERA_SHIM_LIBRARY,
                           .container_dir = kContainerDir,
                           .nvml_library = TESSERA_FAKE_NVML_PATH,
                           .dev_dir = ""});
    ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
    plugin_ = std::move(*plugin);
    for (const ShareDevice& d : plugin_->Devices()) devices_[d.gpu].push_back(d.id);
  }
  // Allocate's tenant file mount (host path) for these devices.
  std::string Slot(const std::vector<std::string>& ids) {
    StatusOr<ShareAllocation> a = plugin_->Allocate(ids);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!a.ok()) return "";
    for (const ContainerMount& m : a->mounts) {
      if (m.container_path == TenantMountPath(kContainerDir)) return m.host_path;
    }
    ADD_FAILURE() << "no tenant file mount";
    return "";
  }
  DraBackstop Backstop(bool kill = true) {
    return DraBackstop({.proc_dir = (root_ / "proc").string(),
                        .counters_dir = "",
                        .context_allowance_mib = 500,
                        .kill = kill,
                        .own_pid = own_,
                        .slot_mount = TenantMountPath(kContainerDir),
                        .owner = "slot"},
                       *nvml_);
  }
  DraBackstop::Pass Check(DraBackstop& backstop) {
    return backstop.Check([this] { return plugin_->BackstopUses(); }, nullptr);
  }
  // A GPU of the fake NVML with these processes (pid, MiB).
  static std::string Gpu(const std::vector<std::pair<pid_t, int>>& procs) { return "A100-40GB:" + Procs(procs); }

  pid_t own_ = 0;
  std::unique_ptr<SharePlugin> plugin_;
  std::map<int, std::vector<std::string>> devices_;
};

TEST_F(DevicePluginBackstopTest, ASlotOverItsLimitIsKilledAndOneWithinItsLimitIsKept) {
  Start();
  const std::string over_file = Slot({devices_[0][0]});  // one share each: 10,134 MiB on GPU 0
  const std::string within_file = Slot({devices_[0][1]});
  const pid_t over = Spawn(kPodA, Mountinfo(over_file)), within = Spawn(kPodB, Mountinfo(within_file));
  const pid_t host = Spawn("");
  // over: 12000 - 500 = 11500 > 10134; within: 9000 - 500 = 8500; the host's process and the
  // plugin's own pod's are no slot's and are left alone.
  Nvml({Gpu({{over, 12000}, {within, 9000}, {host, 20000}, {own_, 20000}}), "A100-40GB"});
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = Check(backstop);
  EXPECT_THAT(pass.problems, IsEmpty());
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].claim, "k8s-dp/" + devices_[0][0]);
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("11500 MiB on GPU 0 over its limit of 10134 MiB"));
  EXPECT_THAT(pass.findings[0].pids, ::testing::ElementsAre(over));
  EXPECT_TRUE(pass.findings[0].killed);
  EXPECT_TRUE(Killed(over));
  for (pid_t kept : {within, host, own_}) EXPECT_EQ(::kill(kept, 0), 0) << kept;
  EXPECT_EQ(backstop.stats().kills, 1);
}

TEST_F(DevicePluginBackstopTest, ASlotsProcessOnAGpuNotItsSlotsIsKilled) {
  Start();
  const pid_t p = Spawn(kPodA, Mountinfo(Slot({devices_[0][0]})));  // the slot is on GPU 0
  Nvml({"A100-40GB", Gpu({{p, 600}})});                             // the process runs on GPU 1
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = Check(backstop);
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_THAT(pass.findings[0].detail,
              HasSubstr("pid " + std::to_string(p) + " on GPU 1 (600 MiB), a GPU not its own"));
  EXPECT_TRUE(Killed(p));
}

TEST_F(DevicePluginBackstopTest, ReportModeReportsASlotOverItsLimitAndKillsNothing) {
  Start();
  const pid_t p = Spawn(kPodA, Mountinfo(Slot({devices_[0][0]})));
  Nvml({Gpu({{p, 15000}}), "A100-40GB"});
  DraBackstop backstop = Backstop(/*kill=*/false);
  DraBackstop::Pass pass = Check(backstop);
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].claim, "k8s-dp/" + devices_[0][0]);
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("14500 MiB on GPU 0 over its limit of 10134 MiB"));
  EXPECT_FALSE(pass.findings[0].killed);
  EXPECT_THAT(Check(backstop).findings, IsEmpty());  // the same episode: once
  EXPECT_EQ(::kill(p, 0), 0);
  EXPECT_EQ(backstop.stats().violations, 1);
  EXPECT_EQ(backstop.stats().kills, 0);
}

// The DRA rule for a pod with no claim: a pod's process that no slot mount names, on a GPU where
// a share is handed out, is killed (a container that escaped the shim, or got the GPU otherwise);
// on a GPU whose only slot is whole (no limits to protect) it is left alone, as are the host's.
TEST_F(DevicePluginBackstopTest, APodsProcessWithNoSlotMountIsKilledOnlyOnAGpuWithShares) {
  Start();
  (void)Slot({devices_[0][0]});  // a share of GPU 0
  (void)Slot(devices_[1]);  // all 4 shares of GPU 1: the whole GPU, no memory limit
  const pid_t escaped = Spawn(kPodD, "700 690 0:52 / / rw,relatime - overlay overlay rw\n");  // no tenant mount
  const pid_t unknown = Spawn(kPodD, Mountinfo("/var/lib/tessera/device-plugin/tenants/GPU-gone__9"));
  const pid_t beside_whole = Spawn(kPodD), host = Spawn("");
  Nvml({Gpu({{escaped, 700}, {unknown, 700}, {host, 700}}), Gpu({{beside_whole, 700}})});
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = Check(backstop);
  ASSERT_EQ(pass.findings.size(), 2u);
  for (const BackstopFinding& f : pass.findings) {
    EXPECT_EQ(f.claim, "");
    EXPECT_THAT(f.detail, HasSubstr("of pod " + std::string(kPodD) + " uses 700 MiB on shared GPU 0 and the pod holds "
                                    "no slot of it"));
  }
  EXPECT_TRUE(Killed(escaped));
  EXPECT_TRUE(Killed(unknown));
  EXPECT_EQ(::kill(beside_whole, 0), 0);
  EXPECT_EQ(::kill(host, 0), 0);
  EXPECT_EQ(backstop.stats().unclaimed, 2);
}

// A restarted plugin rewrites the tenant files (the containers' mounts then show "//deleted"):
// the running containers keep their slots and are not taken for processes of no slot.
TEST_F(DevicePluginBackstopTest, ATenantFileRewrittenByARestartedPluginStillNamesItsSlot) {
  Start();
  const pid_t p = Spawn(kPodA, Mountinfo(Slot({devices_[0][0]}), "//deleted"));
  Nvml({Gpu({{p, 2000}}), "A100-40GB"});
  DraBackstop backstop = Backstop();
  EXPECT_THAT(Check(backstop).findings, IsEmpty());
  EXPECT_EQ(::kill(p, 0), 0);
}

}  // namespace
}  // namespace tessera::k8s

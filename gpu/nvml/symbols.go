package nvml

import (
	"strings"

	"github.com/go-kit/log/level"
)

// NVML symbols newer than the oldest supported driver (R450). Each is looked
// up once after Init; a call whose symbol is missing is never made (calling
// it would end the process with a symbol lookup error).
const (
	symCudaDriverVersion   = "nvmlSystemGetCudaDriverVersion"
	symClocksEventReasons  = "nvmlDeviceGetCurrentClocksEventReasons"    // R535
	symThrottleReasons     = "nvmlDeviceGetCurrentClocksThrottleReasons" // older name
	symEnergy              = "nvmlDeviceGetTotalEnergyConsumption"
	symMigMode             = "nvmlDeviceGetMigMode"
	symMaxMigDeviceCount   = "nvmlDeviceGetMaxMigDeviceCount"
	symMigDeviceByIndex    = "nvmlDeviceGetMigDeviceHandleByIndex"
	symGpuInstanceByID     = "nvmlDeviceGetGpuInstanceById"
	symGIProfileInfo       = "nvmlDeviceGetGpuInstanceProfileInfo"
	symGIProfileInfoV      = "nvmlDeviceGetGpuInstanceProfileInfoV"
	symCreateGI            = "nvmlDeviceCreateGpuInstance"
	symAttributes          = "nvmlDeviceGetAttributes_v2"
	symAttributesV1        = "nvmlDeviceGetAttributes"
	symMPSProcesses        = "nvmlDeviceGetMPSComputeRunningProcesses"
	symProcessUtil         = "nvmlDeviceGetProcessUtilization"
	symGpmSupport          = "nvmlGpmQueryDeviceSupport" // R520, Hopper+
	symGpmAlloc            = "nvmlGpmSampleAlloc"
	symGpmFree             = "nvmlGpmSampleFree"
	symGpmSampleGet        = "nvmlGpmSampleGet"
	symGpmMetricsGet       = "nvmlGpmMetricsGet"
	symGpmMigSampleGet     = "nvmlGpmMigSampleGet"
	symVirtMode            = "nvmlDeviceGetVirtualizationMode"
	symActiveVgpus         = "nvmlDeviceGetActiveVgpus"
	symVgpuMdevUUID        = "nvmlVgpuInstanceGetMdevUUID"
	symVgpuUtil            = "nvmlDeviceGetVgpuUtilization"
	symVgpuProcUtil        = "nvmlDeviceGetVgpuProcessUtilization"
	symSchedCaps           = "nvmlDeviceGetVgpuSchedulerCapabilities"
	symSchedState          = "nvmlDeviceGetVgpuSchedulerState"
	symSchedStateV2        = "nvmlDeviceGetVgpuSchedulerState_v2"
	symSchedLogV2          = "nvmlDeviceGetVgpuSchedulerLog_v2"
	symSchedLog            = "nvmlDeviceGetVgpuSchedulerLog"
	symSetSchedState       = "nvmlDeviceSetVgpuSchedulerState"
	symSetSchedStateV2     = "nvmlDeviceSetVgpuSchedulerState_v2"
	symSetGpuLocked        = "nvmlDeviceSetGpuLockedClocks"
	symResetGpuLocked      = "nvmlDeviceResetGpuLockedClocks"
	symPowerDefault        = "nvmlDeviceGetPowerManagementDefaultLimit"
	symPowerConstraints    = "nvmlDeviceGetPowerManagementLimitConstraints"
	symEventSetCreate      = "nvmlEventSetCreate"
	symRegisterEvents      = "nvmlDeviceRegisterEvents"
	symEventSetWait        = "nvmlEventSetWait_v2"
	symEventSetWaitV1      = "nvmlEventSetWait"
	symComputeInstanceInfo = "nvmlGpuInstanceGetComputeInstances"
	symMemoryInfoV2        = "nvmlDeviceGetMemoryInfo_v2" // R510, used without reserved memory
	symRemappedRows        = "nvmlDeviceGetRemappedRows"  // R460, Ampere+
)

var allSymbols = []string{
	symCudaDriverVersion, symClocksEventReasons, symThrottleReasons, symEnergy,
	symMigMode, symMaxMigDeviceCount, symMigDeviceByIndex, symGpuInstanceByID, symGIProfileInfo, symGIProfileInfoV,
	symCreateGI, symAttributes, symAttributesV1, symMPSProcesses, symProcessUtil, symGpmSupport, symGpmAlloc,
	symGpmFree, symGpmSampleGet, symGpmMetricsGet, symGpmMigSampleGet, symVirtMode, symActiveVgpus, symVgpuMdevUUID,
	symVgpuUtil, symVgpuProcUtil, symSchedCaps, symSchedState, symSchedStateV2, symSchedLogV2,
	symSchedLog, symSetSchedState, symSetSchedStateV2, symSetGpuLocked, symResetGpuLocked,
	symPowerDefault, symPowerConstraints, symEventSetCreate,
	symRegisterEvents, symEventSetWait, symEventSetWaitV1, symComputeInstanceInfo, symMemoryInfoV2,
	symRemappedRows,
}

// lookupSymbols records which of allSymbols the loaded driver has.
func (b *Backend) lookupSymbols() {
	b.syms = make(map[string]bool, len(allSymbols))
	ext := b.lib.Extensions()
	var missing []string
	for _, s := range allSymbols {
		ok := ext != nil && ext.LookupSymbol(s) == nil
		b.syms[s] = ok
		if !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		level.Info(b.logger).Log("msg", "NVML symbols missing in this driver; the readings and knobs that need them are skipped",
			"missing", len(missing), "symbols", strings.Join(missing, ","))
	}
}

// has reports whether every named symbol is present.
func (b *Backend) has(syms ...string) bool {
	for _, s := range syms {
		if !b.syms[s] {
			return false
		}
	}
	return true
}

#pragma once
// The part of the NVML C ABI that gpuhost uses, declared by hand so that building needs no NVIDIA
// header and running needs no NVIDIA library (btop does the same). Names are spelled exactly as
// nvml.h spells them so each line can be checked against it.
//
// Source for every type, value and layout below: nvml.h, NVML_API_VERSION 12, as copied in repo
// NVIDIA/DCGM sdk/nvidia/nvml/dcgm_nvml.h @72fa3fe (DCGM 4.6.0); reference manual
// https://docs.nvidia.com/deploy/nvml-api/. Layouts of the older versions of versioned structs
// (nvmlGridLicensableFeatures v1..v3) are from NVIDIA's Python bindings mirrored in the same repo,
// testing/python3/dcgm_nvml.py (c_nvmlGridLicensableFeature_v{2,3,4}_t).
//
// Calling convention: nvml.h declares plain C functions (DECLDIR is empty or __declspec(dllimport));
// x86-64 has one C calling convention on each OS, so plain function pointers are correct. 32-bit
// Windows is not supported.

#include <cstddef>

namespace gpuhost::gpu::nvml {

// nvmlReturn_t (nvml.h `nvmlReturn_enum`). A fixed underlying type, so any value a newer driver
// returns is representable.
enum nvmlReturn_t : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999,
};

// An opaque device handle owned by the library; valid between nvmlInit and nvmlShutdown.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

enum nvmlEnableState_t : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };

enum nvmlMemoryErrorType_t : int {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
};

enum nvmlEccCounterType_t : int { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };

enum nvmlPageRetirementCause_t : int {
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};

enum nvmlComputeMode_t : int {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

// Windows only.
enum nvmlDriverModel_t : int { NVML_DRIVER_WDDM = 0, NVML_DRIVER_WDM = 1, NVML_DRIVER_MCDM = 2 };

enum nvmlGpuVirtualizationMode_t : int {
  NVML_GPU_VIRTUALIZATION_MODE_NONE = 0,
  NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH = 1,
  NVML_GPU_VIRTUALIZATION_MODE_VGPU = 2,
  NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU = 3,
  NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA = 4,
};

enum nvmlTemperatureSensors_t : int { NVML_TEMPERATURE_GPU = 0 };

enum nvmlTemperatureThresholds_t : int {
  NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
  NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
  NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
};

enum nvmlClockType_t : int {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3
};

// P0 (maximum performance) .. P15 (minimum), 32 = unknown.
enum nvmlPstates_t : int { NVML_PSTATE_0 = 0, NVML_PSTATE_15 = 15, NVML_PSTATE_UNKNOWN = 32 };

// nvml.h: typedef unsigned int nvmlDeviceArchitecture_t; NVML_DEVICE_ARCH_KEPLER 2 .. BLACKWELL 10.
using nvmlDeviceArchitecture_t = unsigned int;

// nvmlDeviceGetMigMode values.
inline constexpr unsigned int NVML_DEVICE_MIG_DISABLE = 0x0;
inline constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 0x1;

// Buffer sizes "guaranteed to be large enough" (nvml.h nvmlConstants).
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_SERIAL_BUFFER_SIZE = 30;
inline constexpr unsigned int NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned int NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;

// Filled by nvmlDeviceGetPciInfo_v3 and _v2. The unversioned nvmlDeviceGetPciInfo predates
// `busId`: it writes the id into the bytes that are now `busIdLegacy` and a shorter tail, so
// callers of the plain version read `busIdLegacy` and the numeric fields only.
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // (device id << 16) | vendor id
  unsigned int pciSubSystemId;  // (subsystem device id << 16) | subsystem vendor id
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

// nvmlDeviceGetMemoryInfo (v1). used = reserved + allocated.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlDeviceGetMemoryInfo_v2. `version` must be set to nvmlMemory_v2 before the call.
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};

// nvml.h: #define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | (ver <<
// 24U))
inline constexpr unsigned int nvml_struct_version(std::size_t size, unsigned int version) {
  return static_cast<unsigned int>(size) | (version << 24U);
}
// nvml.h: #define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2); dcgm_nvml.py: nvmlMemory_v2 = 0x02000028.
inline constexpr unsigned int nvmlMemory_v2 = nvml_struct_version(sizeof(nvmlMemory_v2_t), 2);

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of the sample period a kernel was running
  unsigned int memory;  // percent of the sample period device memory was read or written
};

// vGPU licensing. One function name per layout: _v4 has licenseExpiry, _v3 adds featureEnabled,
// _v2 adds productName to the unversioned layout.
enum nvmlGridLicenseFeatureCode_t : int {
  NVML_GRID_LICENSE_FEATURE_CODE_UNKNOWN = 0,
  NVML_GRID_LICENSE_FEATURE_CODE_VGPU = 1,
  NVML_GRID_LICENSE_FEATURE_CODE_NVIDIA_RTX = 2,
  NVML_GRID_LICENSE_FEATURE_CODE_GAMING = 3,
  NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE = 4,
};
inline constexpr unsigned int NVML_GRID_LICENSE_BUFFER_SIZE = 128;
inline constexpr unsigned int NVML_GRID_LICENSE_FEATURE_MAX_COUNT = 3;
inline constexpr unsigned char NVML_GRID_LICENSE_EXPIRY_NOT_AVAILABLE = 0;
inline constexpr unsigned char NVML_GRID_LICENSE_EXPIRY_INVALID = 1;
inline constexpr unsigned char NVML_GRID_LICENSE_EXPIRY_VALID = 2;
inline constexpr unsigned char NVML_GRID_LICENSE_EXPIRY_NOT_APPLICABLE = 3;
inline constexpr unsigned char NVML_GRID_LICENSE_EXPIRY_PERMANENT = 4;

struct nvmlGridLicenseExpiry_t {
  unsigned int year;
  unsigned short month;
  unsigned short day;
  unsigned short hour;
  unsigned short min;
  unsigned short sec;
  unsigned char status;  // NVML_GRID_LICENSE_EXPIRY_*
};

struct nvmlGridLicensableFeature_v1_t {
  nvmlGridLicenseFeatureCode_t featureCode;
  unsigned int featureState;  // non-zero if the feature is currently licensed
  char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
};
struct nvmlGridLicensableFeature_v2_t {
  nvmlGridLicenseFeatureCode_t featureCode;
  unsigned int featureState;
  char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
  char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
};
struct nvmlGridLicensableFeature_v3_t {
  nvmlGridLicenseFeatureCode_t featureCode;
  unsigned int featureState;
  char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
  char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
  unsigned int featureEnabled;  // non-zero if the feature is enabled
};
struct nvmlGridLicensableFeature_v4_t {
  nvmlGridLicenseFeatureCode_t featureCode;
  unsigned int featureState;
  char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
  char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
  unsigned int featureEnabled;
  nvmlGridLicenseExpiry_t licenseExpiry;
};
template <typename Feature>
struct nvmlGridLicensableFeatures_t {
  int isGridLicenseSupported;
  unsigned int licensableFeaturesCount;
  Feature gridLicensableFeatures[NVML_GRID_LICENSE_FEATURE_MAX_COUNT];
};
using nvmlGridLicensableFeatures_v1_t = nvmlGridLicensableFeatures_t<nvmlGridLicensableFeature_v1_t>;
using nvmlGridLicensableFeatures_v2_t = nvmlGridLicensableFeatures_t<nvmlGridLicensableFeature_v2_t>;
using nvmlGridLicensableFeatures_v3_t = nvmlGridLicensableFeatures_t<nvmlGridLicensableFeature_v3_t>;
using nvmlGridLicensableFeatures_v4_t = nvmlGridLicensableFeatures_t<nvmlGridLicensableFeature_v4_t>;

// nvmlDeviceGetPcieThroughput counters ("1KB granularity"; the value is KB/s over a 20 ms window).
enum nvmlPcieUtilCounter_t : int { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

// Field values (nvmlDeviceGetFieldValues): one call answers several fields, each with its own status.
enum nvmlValueType_t : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};
union nvmlValue_t {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;  // 4 bytes on Windows, 8 on Linux; the union is 8 bytes either way
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};
struct nvmlFieldValue_t {
  unsigned int fieldId;  // NVML_FI_*; set before the call
  unsigned int scopeId;  // e.g. the NVLink index; set before the call
  long long timestamp;   // CPU time of the value, microseconds since 1970
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;  // this field's status; `value` is undefined unless NVML_SUCCESS
  nvmlValue_t value;
};
inline constexpr unsigned int NVML_FI_DEV_MEMORY_TEMP = 82;                 // degrees C (HBM parts)
inline constexpr unsigned int NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138;  // KiB since driver load
inline constexpr unsigned int NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139;  // KiB since driver load
// scopeId that asks the NVLink throughput fields for the sum over every link: what DCGM passes for
// DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL (dcgmlib/src/DcgmCacheManager.cpp:
// "std::numeric_limits<unsigned>::max() represents all NvLinks of the GPU and is passed verbatim to nvml").
inline constexpr unsigned int NVML_NVLINK_SCOPE_ALL_LINKS = 0xFFFFFFFFu;

// nvml.h: #define NVML_VALUE_NOT_AVAILABLE (-1), as it lands in an unsigned long long usedGpuMemory
// ("Under WDDM, NVML_VALUE_NOT_AVAILABLE is always reported because Windows KMD manages all the memory").
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE_ULL = ~0ULL;

// nvmlDeviceGetComputeRunningProcesses / GetGraphicsRunningProcesses (plain names, legacy layout).
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or NVML_VALUE_NOT_AVAILABLE
};
// The _v2 and _v3 names (nvml.h: nvmlProcessInfo_v2_t, also typedef'd as nvmlProcessInfo_t).
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // 0xFFFFFFFF unless MIG
  unsigned int computeInstanceId;  // 0xFFFFFFFF unless MIG
};

// Events. The set is an opaque handle owned by the library (nvmlEventSetFree).
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ULL;
// Filled by nvmlEventSetWait_v2. The two instance ids came with MIG; gpuhost reads only the first
// three members, which every version of nvmlEventSetWait fills.
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;    // the Xid for nvmlEventTypeXidCriticalError; 999 for an unknown Xid
  unsigned int gpuInstanceId;      // 0xFFFFFFFF unless MIG attributes it to an instance
  unsigned int computeInstanceId;  // 0xFFFFFFFF likewise
};

// GPU Performance Monitoring (GPM, Hopper and later): metrics computed between two samples.
struct nvmlGpmSample_st;
using nvmlGpmSample_t = nvmlGpmSample_st*;
// nvmlGpmMetricId_t values used by gpuhost; the _UTIL ones are percent (0.0-100.0), the _PER_SEC
// ones MiB/s.
inline constexpr unsigned int NVML_GPM_METRIC_GRAPHICS_UTIL = 1;
inline constexpr unsigned int NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5;
inline constexpr unsigned int NVML_GPM_METRIC_DRAM_BW_UTIL = 10;
inline constexpr unsigned int NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20;
inline constexpr unsigned int NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21;
// The array bound in this header version. Older drivers were built with a smaller bound under the
// same struct version 1; they only touch metrics[0..numMetrics), which gpuhost keeps small.
inline constexpr unsigned int NVML_GPM_METRIC_MAX = 333;
struct nvmlGpmMetric_t {
  unsigned int metricId;    // in: NVML_GPM_METRIC_*
  nvmlReturn_t nvmlReturn;  // out: this metric's status; `value` is valid only on NVML_SUCCESS
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;  // out: may be null
};
inline constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
struct nvmlGpmMetricsGet_t {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;  // the earlier sample
  nvmlGpmSample_t sample2;  // the later sample
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
};
inline constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;
struct nvmlGpmSupport_t {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;
};

// MIG management (nvml.h, "Multi Instance GPU Management"; Linux only, privileged). GPU instance
// profiles are addressed by NVML_GPU_INSTANCE_PROFILE_* (an index, 0.. below the count); the
// profile's `id` is what nvidia-smi mig -lgip shows and what create takes, and differs by SKU.
struct nvmlGpuInstance_st;
using nvmlGpuInstance_t = nvmlGpuInstance_st*;
struct nvmlComputeInstance_st;
using nvmlComputeInstance_t = nvmlComputeInstance_st*;
// NVML_GPU_INSTANCE_PROFILE_1_SLICE 0, _2_SLICE 1, _3_SLICE 2, _4_SLICE 3, _7_SLICE 4, _8_SLICE 5,
// _6_SLICE 6, _1_SLICE_REV1 7 (+me), _2_SLICE_REV1 8 (+me), _1_SLICE_REV2 9 (1g with twice the
// memory), then the GFX / NO_ME / ALL_ME variants of newer drivers up to 16.
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_COUNT = 17;
// NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0, _2_SLICE 1, _3_SLICE 2, _4_SLICE 3, _7_SLICE 4,
// _8_SLICE 5, _6_SLICE 6, _1_SLICE_REV1 7.
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0;
struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};
struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};
// nvmlDeviceGetGpuInstanceProfileInfoV: the same with a version first and the profile's name
// ("MIG 1g.10gb") last.
struct nvmlGpuInstanceProfileInfo_v2_t {
  unsigned int version;  // nvmlGpuInstanceProfileInfo_v2
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
};
inline constexpr unsigned int nvmlGpuInstanceProfileInfo_v2 =
    static_cast<unsigned int>(sizeof(nvmlGpuInstanceProfileInfo_v2_t)) | (2u << 24);
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};
struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

// nvmlClocksEventReason* bit masks live in gpu/snapshot.h (namespace clocks_event).

// Sizes computed by hand from the declarations in nvml.h (x86-64, natural alignment). A mismatch
// here means a transcription error above, which would corrupt memory at run time.
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(nvmlMemory_v2 == 0x02000028);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlGridLicenseExpiry_t) == 16);
static_assert(sizeof(nvmlGridLicensableFeature_v4_t) == 284);
static_assert(offsetof(nvmlGridLicensableFeature_v4_t, licenseExpiry) == 268);
static_assert(sizeof(nvmlGridLicensableFeatures_v4_t) == 860);
static_assert(sizeof(nvmlGridLicensableFeatures_v3_t) == 812);
static_assert(sizeof(nvmlGridLicensableFeatures_v2_t) == 800);
static_assert(sizeof(nvmlGridLicensableFeatures_v1_t) == 416);
static_assert(sizeof(nvmlReturn_t) == 4 && sizeof(nvmlEnableState_t) == 4 && sizeof(nvmlDriverModel_t) == 4);
static_assert(sizeof(nvmlValue_t) == 8);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB) == 48);
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);
static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, valueType) == 24);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24);
static_assert(offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) == 16);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(offsetof(nvmlEventData_t, eventData) == 16);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 24 + 40 * NVML_GPM_METRIC_MAX);
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24);
static_assert(sizeof(nvmlGpmSupport_t) == 8);

// Function pointer types, one per NVML function gpuhost calls (signatures from nvml.h). Versioned
// names that share a signature share a type.
using nvmlInit_fn = nvmlReturn_t (*)();  // nvmlInit_v2, nvmlInit
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t result);
using nvmlSystemGetString_fn = nvmlReturn_t (*)(char* buffer,
                                                unsigned int length);      // DriverVersion, NVMLVersion
using nvmlSystemGetCudaDriverVersion_fn = nvmlReturn_t (*)(int* version);  // _v2, plain
using nvmlDeviceGetCount_fn = nvmlReturn_t (*)(unsigned int* count);       // _v2, plain
using nvmlDeviceGetHandleByIndex_fn = nvmlReturn_t (*)(unsigned int index, nvmlDevice_t* device);
// Name, UUID, Serial, VbiosVersion.
using nvmlDeviceGetString_fn = nvmlReturn_t (*)(nvmlDevice_t device, char* buffer, unsigned int length);
using nvmlDeviceGetPciInfo_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlPciInfo_t* pci);  // _v3, _v2, plain
using nvmlDeviceGetArchitecture_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch);
using nvmlDeviceGetCudaComputeCapability_fn = nvmlReturn_t (*)(nvmlDevice_t device, int* major, int* minor);
using nvmlDeviceValidateInforom_fn = nvmlReturn_t (*)(nvmlDevice_t device);
using nvmlDeviceGetMemoryInfo_v2_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlMemory_v2_t* memory);
using nvmlDeviceGetMemoryInfo_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlMemory_t* memory);
// EccMode (current, pending).
using nvmlDeviceGetEnableStatePair_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlEnableState_t* current,
                                                         nvmlEnableState_t* pending);
// PersistenceMode, RetiredPagesPendingStatus.
using nvmlDeviceGetEnableState_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlEnableState_t* state);
using nvmlDeviceGetTotalEccErrors_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlMemoryErrorType_t error_type,
                                                        nvmlEccCounterType_t counter_type,
                                                        unsigned long long* count);
using nvmlDeviceGetRetiredPages_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                                      unsigned int* page_count,
                                                      unsigned long long* addresses);
using nvmlDeviceGetRemappedRows_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* correctable,
                                                      unsigned int* uncorrectable, unsigned int* pending,
                                                      unsigned int* failure);
// CurrPcieLinkGeneration/Width, MaxPcieLinkGeneration/Width, GpuMaxPcieLinkGeneration,
// PcieReplayCounter, PowerUsage, EnforcedPowerLimit, FanSpeed.
using nvmlDeviceGetUint_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* value);
using nvmlDeviceGetComputeMode_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlComputeMode_t* mode);
using nvmlDeviceGetDriverModel_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlDriverModel_t* current,
                                                     nvmlDriverModel_t* pending);  // _v2, plain
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* current,
                                                 unsigned int* pending);
// MIG device handles of a GPU in MIG mode (R450+): slot `index` of nvmlDeviceGetMaxMigDeviceCount;
// NVML_ERROR_NOT_FOUND for an empty slot. GpuInstanceId / ComputeInstanceId are nvmlDeviceGetUint_fn.
using nvmlDeviceGetMigDeviceHandleByIndex_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int index,
                                                                nvmlDevice_t* mig_device);
// MIG management (Linux only; privileged).
using nvmlDeviceSetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int mode,
                                                 nvmlReturn_t* activation_status);
using nvmlDeviceGetGpuInstanceProfileInfo_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int profile,
                                                                nvmlGpuInstanceProfileInfo_t* info);
using nvmlDeviceGetGpuInstanceProfileInfoV_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int profile,
                                                                 nvmlGpuInstanceProfileInfo_v2_t* info);
using nvmlDeviceCreateGpuInstance_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int profile_id,
                                                        nvmlGpuInstance_t* instance);
using nvmlDeviceGetGpuInstances_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int profile_id,
                                                      nvmlGpuInstance_t* instances, unsigned int* count);
using nvmlGpuInstanceGetInfo_fn = nvmlReturn_t (*)(nvmlGpuInstance_t instance, nvmlGpuInstanceInfo_t* info);
using nvmlGpuInstanceDestroy_fn = nvmlReturn_t (*)(nvmlGpuInstance_t instance);
using nvmlGpuInstanceGetComputeInstanceProfileInfo_fn =
    nvmlReturn_t (*)(nvmlGpuInstance_t instance, unsigned int profile, unsigned int engine_profile,
                     nvmlComputeInstanceProfileInfo_t* info);
using nvmlGpuInstanceCreateComputeInstance_fn = nvmlReturn_t (*)(nvmlGpuInstance_t instance,
                                                                 unsigned int profile_id,
                                                                 nvmlComputeInstance_t* compute);
using nvmlGpuInstanceGetComputeInstances_fn = nvmlReturn_t (*)(nvmlGpuInstance_t instance, unsigned int profile_id,
                                                               nvmlComputeInstance_t* computes,
                                                               unsigned int* count);
using nvmlComputeInstanceDestroy_fn = nvmlReturn_t (*)(nvmlComputeInstance_t compute);
using nvmlDeviceGetVirtualizationMode_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                            nvmlGpuVirtualizationMode_t* mode);
using nvmlDeviceGetGridLicensableFeatures_v4_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                   nvmlGridLicensableFeatures_v4_t* features);
using nvmlDeviceGetGridLicensableFeatures_v3_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                   nvmlGridLicensableFeatures_v3_t* features);
using nvmlDeviceGetGridLicensableFeatures_v2_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                   nvmlGridLicensableFeatures_v2_t* features);
using nvmlDeviceGetGridLicensableFeatures_v1_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                   nvmlGridLicensableFeatures_v1_t* features);
// CurrentClocksEventReasons, CurrentClocksThrottleReasons.
using nvmlDeviceGetClocksEventReasons_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned long long* reasons);
using nvmlDeviceGetTemperature_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                                     unsigned int* temp);
using nvmlDeviceGetTemperatureThreshold_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                              nvmlTemperatureThresholds_t threshold,
                                                              unsigned int* temp);
using nvmlDeviceGetClock_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlClockType_t type,
                                               unsigned int* mhz);  // ClockInfo, MaxClockInfo
using nvmlDeviceGetUtilizationRates_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                          nvmlUtilization_t* utilization);
using nvmlDeviceGetPerformanceState_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlPstates_t* state);
using nvmlDeviceGetTotalEnergyConsumption_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                unsigned long long* energy_mj);
using nvmlDeviceGetPcieThroughput_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                                        unsigned int* kb_per_s);
// EncoderUtilization, DecoderUtilization.
using nvmlDeviceGetCodecUtilization_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* utilization,
                                                          unsigned int* sampling_period_us);
using nvmlDeviceGetFieldValues_fn = nvmlReturn_t (*)(nvmlDevice_t device, int values_count,
                                                     nvmlFieldValue_t* values);
// Compute/GraphicsRunningProcesses: _v3 and _v2 take nvmlProcessInfo_v2_t, the plain names v1.
using nvmlDeviceGetRunningProcesses_v2_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* info_count,
                                                             nvmlProcessInfo_v2_t* infos);
using nvmlDeviceGetRunningProcesses_v1_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* info_count,
                                                             nvmlProcessInfo_v1_t* infos);
using nvmlEventSetCreate_fn = nvmlReturn_t (*)(nvmlEventSet_t* set);
using nvmlDeviceRegisterEvents_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned long long event_types,
                                                     nvmlEventSet_t set);
using nvmlEventSetWait_fn = nvmlReturn_t (*)(nvmlEventSet_t set, nvmlEventData_t* data,
                                             unsigned int timeout_ms);  // _v2, plain
using nvmlEventSetFree_fn = nvmlReturn_t (*)(nvmlEventSet_t set);
using nvmlGpmQueryDeviceSupport_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlGpmSupport_t* support);
using nvmlGpmSampleAlloc_fn = nvmlReturn_t (*)(nvmlGpmSample_t* sample);
using nvmlGpmSampleFree_fn = nvmlReturn_t (*)(nvmlGpmSample_t sample);
using nvmlGpmSampleGet_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlGpmSample_t sample);
// A MIG GPU instance's sample, taken on its parent GPU (R525 and later).
using nvmlGpmMigSampleGet_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned gpu_instance_id,
                                                nvmlGpmSample_t sample);
using nvmlGpmMetricsGet_fn = nvmlReturn_t (*)(nvmlGpmMetricsGet_t* metrics);

}  // namespace gpuhost::gpu::nvml

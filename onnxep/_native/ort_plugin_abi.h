/* onnxep as an onnxruntime plugin execution provider: the parts of onnxruntime's C ABI that onnxep uses.

Declarations are onnxep's own, written from the facts of onnxruntime's public headers (onnxruntime_c_api.h and
onnxruntime_ep_c_api.h, the `ort_api_1_to_25` / `ort_ep_api` tables and their static_assert anchors). Target ABI
version 24 (onnxruntime 1.24, when kernel registries arrived): every struct onnxep fills says
ort_version_supported = 24, so onnxruntime never reads a slot past version 24's end.

OrtApi and OrtEpApi list every slot up to version 24 by name (a wrong slot number crashes at run time, so the whole
table is here and tests/ort_plugin/test_abi.py checks offsetof() of the anchored slots against
tests/ort_plugin/abi_anchors.json); slots onnxep does not call are `void*`. Only C here: the callbacks are Cython
(onnxep/_k_ort_plugin.pxi), compiled into each ISA variant of the kernel module, which is itself the plugin library.
*/
#ifndef ONNXEP_ORT_PLUGIN_ABI_H
#define ONNXEP_ORT_PLUGIN_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ONNXEP_ORT_API_VERSION 24
#define ONNXEP_EP_NAME "onnxep"
#define ONNXEP_EP_VENDOR "onnxep"
#define ONNXEP_EP_VERSION "0.1.0"

/* Opaque onnxruntime objects. */
typedef struct OrtStatus OrtStatus;
typedef struct OrtValue OrtValue;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtLogger OrtLogger;
typedef struct OrtHardwareDevice OrtHardwareDevice;
typedef struct OrtEpDevice OrtEpDevice;
typedef struct OrtKeyValuePairs OrtKeyValuePairs;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtGraph OrtGraph;
typedef struct OrtNode OrtNode;
typedef struct OrtValueInfo OrtValueInfo;
typedef struct OrtEpGraphSupportInfo OrtEpGraphSupportInfo;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtMemoryDevice OrtMemoryDevice;
typedef struct OrtAllocator OrtAllocator;
typedef struct OrtDataTransferImpl OrtDataTransferImpl;
typedef struct OrtSyncStreamImpl OrtSyncStreamImpl;
typedef struct OrtNodeComputeInfo OrtNodeComputeInfo;
typedef struct OrtNodeComputeContext OrtNodeComputeContext;
typedef struct OrtOpAttr OrtOpAttr;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtKernelRegistry OrtKernelRegistry;
typedef struct OrtKernelDefBuilder OrtKernelDefBuilder;
typedef struct OrtKernelDef OrtKernelDef;
typedef struct OrtDataType OrtDataType;
typedef struct OrtSharedPrePackedWeightCache OrtSharedPrePackedWeightCache;
typedef struct OrtDeviceEpIncompatibilityDetails OrtDeviceEpIncompatibilityDetails;
typedef struct OrtExternalResourceImporterImpl OrtExternalResourceImporterImpl;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;

typedef enum OrtErrorCode {
    ORT_OK = 0, ORT_FAIL = 1, ORT_INVALID_ARGUMENT = 2, ORT_NO_SUCHFILE = 3, ORT_NO_MODEL = 4, ORT_ENGINE_ERROR = 5,
    ORT_RUNTIME_EXCEPTION = 6, ORT_INVALID_PROTOBUF = 7, ORT_MODEL_LOADED = 8, ORT_NOT_IMPLEMENTED = 9,
    ORT_INVALID_GRAPH = 10, ORT_EP_FAIL = 11
} OrtErrorCode;

typedef enum ONNXTensorElementDataType {
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1
    /* others unused by onnxep's plugin so far */
} ONNXTensorElementDataType;

typedef enum OrtHardwareDeviceType {
    OrtHardwareDeviceType_CPU = 0, OrtHardwareDeviceType_GPU = 1, OrtHardwareDeviceType_NPU = 2
} OrtHardwareDeviceType;

/* OrtOpAttrType (onnxruntime_c_api.h): the attribute kinds ReadOpAttr reads. */
typedef enum OrtOpAttrType {
    ORT_OP_ATTR_UNDEFINED = 0, ORT_OP_ATTR_INT, ORT_OP_ATTR_INTS, ORT_OP_ATTR_FLOAT, ORT_OP_ATTR_FLOATS,
    ORT_OP_ATTR_STRING, ORT_OP_ATTR_STRINGS, ORT_OP_ATTR_GRAPH, ORT_OP_ATTR_TENSOR
} OrtOpAttrType;

/* OrtNodeFusionOptions, version 23 layout. */
typedef struct OrtNodeFusionOptions {
    uint32_t ort_version_supported;
    bool drop_constant_initializers;
} OrtNodeFusionOptions;

/* OrtNodeComputeInfo, version 23 layout: what OrtEp::Compile returns per fused node. */
struct OrtNodeComputeInfo {
    uint32_t ort_version_supported;
    OrtStatus* (*CreateState)(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* compute_context, void** compute_state);
    OrtStatus* (*Compute)(OrtNodeComputeInfo* this_ptr, void* compute_state, OrtKernelContext* kernel_context);
    void (*ReleaseState)(OrtNodeComputeInfo* this_ptr, void* compute_state);
};

typedef enum OrtCompiledModelCompatibility {
    OrtCompiledModelCompatibility_EP_NOT_APPLICABLE = 0
} OrtCompiledModelCompatibility;

typedef enum OrtEpDataLayout { OrtEpDataLayout_NCHW = 0, OrtEpDataLayout_NHWC = 1 } OrtEpDataLayout;

typedef struct OrtApi OrtApi;
typedef struct OrtEpApi OrtEpApi;
typedef struct OrtEp OrtEp;
typedef struct OrtEpFactory OrtEpFactory;

/* Never versioned: two slots forever. */
typedef struct OrtApiBase {
    const OrtApi* (*GetApi)(uint32_t version);
    const char* (*GetVersionString)(void);
} OrtApiBase;

typedef struct OrtKernelImpl OrtKernelImpl;
typedef OrtStatus* (*OrtKernelCreateFunc)(void* kernel_create_func_state, const OrtKernelInfo* info,
                                          OrtKernelImpl** kernel_out);

struct OrtApi {
    OrtStatus* (*CreateStatus)(OrtErrorCode code, const char* msg);  /* 0 */
    OrtErrorCode (*GetErrorCode)(const OrtStatus* status);  /* 1 */
    const char* (*GetErrorMessage)(const OrtStatus* status);  /* 2 */
    void* CreateEnv;  /* 3 */
    void* CreateEnvWithCustomLogger;  /* 4 */
    void* EnableTelemetryEvents;  /* 5 */
    void* DisableTelemetryEvents;  /* 6 */
    void* CreateSession;  /* 7 */
    void* CreateSessionFromArray;  /* 8 */
    void* Run;  /* 9 */
    void* CreateSessionOptions;  /* 10 */
    void* SetOptimizedModelFilePath;  /* 11 */
    void* CloneSessionOptions;  /* 12 */
    void* SetSessionExecutionMode;  /* 13 */
    void* EnableProfiling;  /* 14 */
    void* DisableProfiling;  /* 15 */
    void* EnableMemPattern;  /* 16 */
    void* DisableMemPattern;  /* 17 */
    void* EnableCpuMemArena;  /* 18 */
    void* DisableCpuMemArena;  /* 19 */
    void* SetSessionLogId;  /* 20 */
    void* SetSessionLogVerbosityLevel;  /* 21 */
    void* SetSessionLogSeverityLevel;  /* 22 */
    void* SetSessionGraphOptimizationLevel;  /* 23 */
    void* SetIntraOpNumThreads;  /* 24 */
    void* SetInterOpNumThreads;  /* 25 */
    void* CreateCustomOpDomain;  /* 26 */
    void* CustomOpDomain_Add;  /* 27 */
    void* AddCustomOpDomain;  /* 28 */
    void* RegisterCustomOpsLibrary;  /* 29 */
    void* SessionGetInputCount;  /* 30 */
    void* SessionGetOutputCount;  /* 31 */
    void* SessionGetOverridableInitializerCount;  /* 32 */
    void* SessionGetInputTypeInfo;  /* 33 */
    void* SessionGetOutputTypeInfo;  /* 34 */
    void* SessionGetOverridableInitializerTypeInfo;  /* 35 */
    void* SessionGetInputName;  /* 36 */
    void* SessionGetOutputName;  /* 37 */
    void* SessionGetOverridableInitializerName;  /* 38 */
    void* CreateRunOptions;  /* 39 */
    void* RunOptionsSetRunLogVerbosityLevel;  /* 40 */
    void* RunOptionsSetRunLogSeverityLevel;  /* 41 */
    void* RunOptionsSetRunTag;  /* 42 */
    void* RunOptionsGetRunLogVerbosityLevel;  /* 43 */
    void* RunOptionsGetRunLogSeverityLevel;  /* 44 */
    void* RunOptionsGetRunTag;  /* 45 */
    void* RunOptionsSetTerminate;  /* 46 */
    void* RunOptionsUnsetTerminate;  /* 47 */
    void* CreateTensorAsOrtValue;  /* 48 */
    void* CreateTensorWithDataAsOrtValue;  /* 49 */
    void* IsTensor;  /* 50 */
    OrtStatus* (*GetTensorMutableData)(OrtValue* value, void** out);  /* 51 */
    void* FillStringTensor;  /* 52 */
    void* GetStringTensorDataLength;  /* 53 */
    void* GetStringTensorContent;  /* 54 */
    OrtStatus* (*CastTypeInfoToTensorInfo)(const OrtTypeInfo* type_info, const OrtTensorTypeAndShapeInfo** out);  /* 55 */
    void* GetOnnxTypeFromTypeInfo;  /* 56 */
    void* CreateTensorTypeAndShapeInfo;  /* 57 */
    void* SetTensorElementType;  /* 58 */
    void* SetDimensions;  /* 59 */
    OrtStatus* (*GetTensorElementType)(const OrtTensorTypeAndShapeInfo* info, ONNXTensorElementDataType* out);  /* 60 */
    OrtStatus* (*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo* info, size_t* out);  /* 61 */
    OrtStatus* (*GetDimensions)(const OrtTensorTypeAndShapeInfo* info, int64_t* dim_values, size_t dim_values_length);  /* 62 */
    void* GetSymbolicDimensions;  /* 63 */
    void* GetTensorShapeElementCount;  /* 64 */
    OrtStatus* (*GetTensorTypeAndShape)(const OrtValue* value, OrtTensorTypeAndShapeInfo** out);  /* 65 */
    void* GetTypeInfo;  /* 66 */
    void* GetValueType;  /* 67 */
    void* CreateMemoryInfo;  /* 68 */
    void* CreateCpuMemoryInfo;  /* 69 */
    void* CompareMemoryInfo;  /* 70 */
    void* MemoryInfoGetName;  /* 71 */
    void* MemoryInfoGetId;  /* 72 */
    void* MemoryInfoGetMemType;  /* 73 */
    void* MemoryInfoGetType;  /* 74 */
    OrtStatus* (*AllocatorAlloc)(OrtAllocator* ort_allocator, size_t size, void** out);  /* 75 */
    OrtStatus* (*AllocatorFree)(OrtAllocator* ort_allocator, void* p);  /* 76 */
    void* AllocatorGetInfo;  /* 77 */
    void* GetAllocatorWithDefaultOptions;  /* 78 */
    void* AddFreeDimensionOverride;  /* 79 */
    void* GetValue;  /* 80 */
    void* GetValueCount;  /* 81 */
    void* CreateValue;  /* 82 */
    void* CreateOpaqueValue;  /* 83 */
    void* GetOpaqueValue;  /* 84 */
    OrtStatus* (*KernelInfoGetAttribute_float)(const OrtKernelInfo* info, const char* name, float* out);  /* 85 */
    OrtStatus* (*KernelInfoGetAttribute_int64)(const OrtKernelInfo* info, const char* name, int64_t* out);  /* 86 */
    OrtStatus* (*KernelInfoGetAttribute_string)(const OrtKernelInfo* info, const char* name, char* out, size_t* size);  /* 87 */
    OrtStatus* (*KernelContext_GetInputCount)(const OrtKernelContext* context, size_t* out);  /* 88 */
    OrtStatus* (*KernelContext_GetOutputCount)(const OrtKernelContext* context, size_t* out);  /* 89 */
    OrtStatus* (*KernelContext_GetInput)(const OrtKernelContext* context, size_t index, const OrtValue** out);  /* 90 */
    OrtStatus* (*KernelContext_GetOutput)(OrtKernelContext* context, size_t index, const int64_t* dim_values, size_t dim_count, OrtValue** out);  /* 91 */
    void* ReleaseEnv;  /* 92 */
    void (*ReleaseStatus)(OrtStatus* status);  /* 93 */
    void* ReleaseMemoryInfo;  /* 94 */
    void* ReleaseSession;  /* 95 */
    void* ReleaseValue;  /* 96 */
    void* ReleaseRunOptions;  /* 97 */
    void* ReleaseTypeInfo;  /* 98 */
    void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo* info);  /* 99 */
    void* ReleaseSessionOptions;  /* 100 */
    void* ReleaseCustomOpDomain;  /* 101 */
    void* GetDenotationFromTypeInfo;  /* 102 */
    void* CastTypeInfoToMapTypeInfo;  /* 103 */
    void* CastTypeInfoToSequenceTypeInfo;  /* 104 */
    void* GetMapKeyType;  /* 105 */
    void* GetMapValueType;  /* 106 */
    void* GetSequenceElementType;  /* 107 */
    void* ReleaseMapTypeInfo;  /* 108 */
    void* ReleaseSequenceTypeInfo;  /* 109 */
    void* SessionEndProfiling;  /* 110 */
    void* SessionGetModelMetadata;  /* 111 */
    void* ModelMetadataGetProducerName;  /* 112 */
    void* ModelMetadataGetGraphName;  /* 113 */
    void* ModelMetadataGetDomain;  /* 114 */
    void* ModelMetadataGetDescription;  /* 115 */
    void* ModelMetadataLookupCustomMetadataMap;  /* 116 */
    void* ModelMetadataGetVersion;  /* 117 */
    void* ReleaseModelMetadata;  /* 118 */
    void* CreateEnvWithGlobalThreadPools;  /* 119 */
    void* DisablePerSessionThreads;  /* 120 */
    void* CreateThreadingOptions;  /* 121 */
    void* ReleaseThreadingOptions;  /* 122 */
    void* ModelMetadataGetCustomMetadataMapKeys;  /* 123 */
    void* AddFreeDimensionOverrideByName;  /* 124 */
    void* GetAvailableProviders;  /* 125 */
    void* ReleaseAvailableProviders;  /* 126 */
    void* GetStringTensorElementLength;  /* 127 */
    void* GetStringTensorElement;  /* 128 */
    void* FillStringTensorElement;  /* 129 */
    void* AddSessionConfigEntry;  /* 130 */
    void* CreateAllocator;  /* 131 */
    void* ReleaseAllocator;  /* 132 */
    void* RunWithBinding;  /* 133 */
    void* CreateIoBinding;  /* 134 */
    void* ReleaseIoBinding;  /* 135 */
    void* BindInput;  /* 136 */
    void* BindOutput;  /* 137 */
    void* BindOutputToDevice;  /* 138 */
    void* GetBoundOutputNames;  /* 139 */
    void* GetBoundOutputValues;  /* 140 */
    void* ClearBoundInputs;  /* 141 */
    void* ClearBoundOutputs;  /* 142 */
    void* TensorAt;  /* 143 */
    void* CreateAndRegisterAllocator;  /* 144 */
    void* SetLanguageProjection;  /* 145 */
    void* SessionGetProfilingStartTimeNs;  /* 146 */
    void* SetGlobalIntraOpNumThreads;  /* 147 */
    void* SetGlobalInterOpNumThreads;  /* 148 */
    void* SetGlobalSpinControl;  /* 149 */
    void* AddInitializer;  /* 150 */
    void* CreateEnvWithCustomLoggerAndGlobalThreadPools;  /* 151 */
    void* SessionOptionsAppendExecutionProvider_CUDA;  /* 152 */
    void* SessionOptionsAppendExecutionProvider_ROCM;  /* 153 */
    void* SessionOptionsAppendExecutionProvider_OpenVINO;  /* 154 */
    void* SetGlobalDenormalAsZero;  /* 155 */
    void* CreateArenaCfg;  /* 156 */
    void* ReleaseArenaCfg;  /* 157 */
    void* ModelMetadataGetGraphDescription;  /* 158 */
    void* SessionOptionsAppendExecutionProvider_TensorRT;  /* 159 */
    void* SetCurrentGpuDeviceId;  /* 160 */
    void* GetCurrentGpuDeviceId;  /* 161 */
    void* KernelInfoGetAttributeArray_float;  /* 162 */
    OrtStatus* (*KernelInfoGetAttributeArray_int64)(const OrtKernelInfo* info, const char* name, int64_t* out, size_t* size);  /* 163 */
    void* CreateArenaCfgV2;  /* 164 */
    void* AddRunConfigEntry;  /* 165 */
    void* CreatePrepackedWeightsContainer;  /* 166 */
    void* ReleasePrepackedWeightsContainer;  /* 167 */
    void* CreateSessionWithPrepackedWeightsContainer;  /* 168 */
    void* CreateSessionFromArrayWithPrepackedWeightsContainer;  /* 169 */
    void* SessionOptionsAppendExecutionProvider_TensorRT_V2;  /* 170 */
    void* CreateTensorRTProviderOptions;  /* 171 */
    void* UpdateTensorRTProviderOptions;  /* 172 */
    void* GetTensorRTProviderOptionsAsString;  /* 173 */
    void* ReleaseTensorRTProviderOptions;  /* 174 */
    void* EnableOrtCustomOps;  /* 175 */
    void* RegisterAllocator;  /* 176 */
    void* UnregisterAllocator;  /* 177 */
    void* IsSparseTensor;  /* 178 */
    void* CreateSparseTensorAsOrtValue;  /* 179 */
    void* FillSparseTensorCoo;  /* 180 */
    void* FillSparseTensorCsr;  /* 181 */
    void* FillSparseTensorBlockSparse;  /* 182 */
    void* CreateSparseTensorWithValuesAsOrtValue;  /* 183 */
    void* UseCooIndices;  /* 184 */
    void* UseCsrIndices;  /* 185 */
    void* UseBlockSparseIndices;  /* 186 */
    void* GetSparseTensorFormat;  /* 187 */
    void* GetSparseTensorValuesTypeAndShape;  /* 188 */
    void* GetSparseTensorValues;  /* 189 */
    void* GetSparseTensorIndicesTypeShape;  /* 190 */
    void* GetSparseTensorIndices;  /* 191 */
    void* HasValue;  /* 192 */
    void* KernelContext_GetGPUComputeStream;  /* 193 */
    void* GetTensorMemoryInfo;  /* 194 */
    void* GetExecutionProviderApi;  /* 195 */
    void* SessionOptionsSetCustomCreateThreadFn;  /* 196 */
    void* SessionOptionsSetCustomThreadCreationOptions;  /* 197 */
    void* SessionOptionsSetCustomJoinThreadFn;  /* 198 */
    void* SetGlobalCustomCreateThreadFn;  /* 199 */
    void* SetGlobalCustomThreadCreationOptions;  /* 200 */
    void* SetGlobalCustomJoinThreadFn;  /* 201 */
    void* SynchronizeBoundInputs;  /* 202 */
    void* SynchronizeBoundOutputs;  /* 203 */
    void* SessionOptionsAppendExecutionProvider_CUDA_V2;  /* 204 */
    void* CreateCUDAProviderOptions;  /* 205 */
    void* UpdateCUDAProviderOptions;  /* 206 */
    void* GetCUDAProviderOptionsAsString;  /* 207 */
    void* ReleaseCUDAProviderOptions;  /* 208 */
    void* SessionOptionsAppendExecutionProvider_MIGraphX;  /* 209 */
    void* AddExternalInitializers;  /* 210 */
    OrtStatus* (*CreateOpAttr)(const char* name, const void* data, int len, OrtOpAttrType type, OrtOpAttr** out);  /* 211 */
    void (*ReleaseOpAttr)(OrtOpAttr* attr);  /* 212 */
    void* CreateOp;  /* 213 */
    void* InvokeOp;  /* 214 */
    void* ReleaseOp;  /* 215 */
    void* SessionOptionsAppendExecutionProvider;  /* 216 */
    void* CopyKernelInfo;  /* 217 */
    void* ReleaseKernelInfo;  /* 218 */
    void* GetTrainingApi;  /* 219 */
    void* SessionOptionsAppendExecutionProvider_CANN;  /* 220 */
    void* CreateCANNProviderOptions;  /* 221 */
    void* UpdateCANNProviderOptions;  /* 222 */
    void* GetCANNProviderOptionsAsString;  /* 223 */
    void* ReleaseCANNProviderOptions;  /* 224 */
    void* MemoryInfoGetDeviceType;  /* 225 */
    void* UpdateEnvWithCustomLogLevel;  /* 226 */
    void* SetGlobalIntraOpThreadAffinity;  /* 227 */
    void* RegisterCustomOpsLibrary_V2;  /* 228 */
    void* RegisterCustomOpsUsingFunction;  /* 229 */
    OrtStatus* (*KernelInfo_GetInputCount)(const OrtKernelInfo* info, size_t* out);  /* 230 */
    void* KernelInfo_GetOutputCount;  /* 231 */
    OrtStatus* (*KernelInfo_GetInputName)(const OrtKernelInfo* info, size_t index, char* out, size_t* size);  /* 232 */
    OrtStatus* (*KernelInfo_GetOutputName)(const OrtKernelInfo* info, size_t index, char* out, size_t* size);  /* 233 */
    void* KernelInfo_GetInputTypeInfo;  /* 234 */
    void* KernelInfo_GetOutputTypeInfo;  /* 235 */
    void* KernelInfoGetAttribute_tensor;  /* 236 */
    OrtStatus* (*HasSessionConfigEntry)(const OrtSessionOptions* options, const char* config_key, int* out);  /* 237 */
    OrtStatus* (*GetSessionConfigEntry)(const OrtSessionOptions* options, const char* config_key, char* config_value, size_t* size);  /* 238 */
    void* SessionOptionsAppendExecutionProvider_Dnnl;  /* 239 */
    void* CreateDnnlProviderOptions;  /* 240 */
    void* UpdateDnnlProviderOptions;  /* 241 */
    void* GetDnnlProviderOptionsAsString;  /* 242 */
    void* ReleaseDnnlProviderOptions;  /* 243 */
    void* KernelInfo_GetNodeName;  /* 244 */
    void* KernelInfo_GetLogger;  /* 245 */
    void* KernelContext_GetLogger;  /* 246 */
    void* Logger_LogMessage;  /* 247 */
    void* Logger_GetLoggingSeverityLevel;  /* 248 */
    void* KernelInfoGetConstantInput_tensor;  /* 249 */
    void* CastTypeInfoToOptionalTypeInfo;  /* 250 */
    void* GetOptionalContainedTypeInfo;  /* 251 */
    void* GetResizedStringTensorElementBuffer;  /* 252 */
    void* KernelContext_GetAllocator;  /* 253 */
    void* GetBuildInfoString;  /* 254 */
    void* CreateROCMProviderOptions;  /* 255 */
    void* UpdateROCMProviderOptions;  /* 256 */
    void* GetROCMProviderOptionsAsString;  /* 257 */
    void* ReleaseROCMProviderOptions;  /* 258 */
    void* CreateAndRegisterAllocatorV2;  /* 259 */
    void* RunAsync;  /* 260 */
    void* UpdateTensorRTProviderOptionsWithValue;  /* 261 */
    void* GetTensorRTProviderOptionsByName;  /* 262 */
    void* UpdateCUDAProviderOptionsWithValue;  /* 263 */
    void* GetCUDAProviderOptionsByName;  /* 264 */
    void* KernelContext_GetResource;  /* 265 */
    void* SetUserLoggingFunction;  /* 266 */
    void* ShapeInferContext_GetInputCount;  /* 267 */
    void* ShapeInferContext_GetInputTypeShape;  /* 268 */
    void* ShapeInferContext_GetAttribute;  /* 269 */
    void* ShapeInferContext_SetOutputTypeShape;  /* 270 */
    void* SetSymbolicDimensions;  /* 271 */
    OrtStatus* (*ReadOpAttr)(const OrtOpAttr* op_attr, OrtOpAttrType type, void* data, size_t len, size_t* out);  /* 272 */
    void* SetDeterministicCompute;  /* 273 */
    OrtStatus* (*KernelContext_ParallelFor)(const OrtKernelContext* context, void (*fn)(void*, size_t), size_t total, size_t num_batch, void* usr_data);  /* 274 */
    void* SessionOptionsAppendExecutionProvider_OpenVINO_V2;  /* 275 */
    void* SessionOptionsAppendExecutionProvider_VitisAI;  /* 276 */
    void* KernelContext_GetScratchBuffer;  /* 277 */
    void* KernelInfoGetAllocator;  /* 278 */
    void* AddExternalInitializersFromFilesInMemory;  /* 279 */
    void* CreateLoraAdapter;  /* 280 */
    void* CreateLoraAdapterFromArray;  /* 281 */
    void* ReleaseLoraAdapter;  /* 282 */
    void* RunOptionsAddActiveLoraAdapter;  /* 283 */
    void* SetEpDynamicOptions;  /* 284 */
    void* ReleaseValueInfo;  /* 285 */
    void* ReleaseNode;  /* 286 */
    void* ReleaseGraph;  /* 287 */
    void* ReleaseModel;  /* 288 */
    OrtStatus* (*GetValueInfoName)(const OrtValueInfo* value_info, const char** name);  /* 289 */
    OrtStatus* (*GetValueInfoTypeInfo)(const OrtValueInfo* value_info, const OrtTypeInfo** type_info);  /* 290 */
    const struct OrtModelEditorApi* (*GetModelEditorApi)(void);  /* 291 */
    void* CreateTensorWithDataAndDeleterAsOrtValue;  /* 292 */
    void* SessionOptionsSetLoadCancellationFlag;  /* 293 */
    void* GetCompileApi;  /* 294 */
    void* CreateKeyValuePairs;  /* 295 */
    void* AddKeyValuePair;  /* 296 */
    void* GetKeyValue;  /* 297 */
    void* GetKeyValuePairs;  /* 298 */
    void* RemoveKeyValuePair;  /* 299 */
    void* ReleaseKeyValuePairs;  /* 300 */
    void* RegisterExecutionProviderLibrary;  /* 301 */
    void* UnregisterExecutionProviderLibrary;  /* 302 */
    void* GetEpDevices;  /* 303 */
    void* SessionOptionsAppendExecutionProvider_V2;  /* 304 */
    void* SessionOptionsSetEpSelectionPolicy;  /* 305 */
    void* SessionOptionsSetEpSelectionPolicyDelegate;  /* 306 */
    OrtHardwareDeviceType (*HardwareDevice_Type)(const OrtHardwareDevice* device);  /* 307 */
    void* HardwareDevice_VendorId;  /* 308 */
    void* HardwareDevice_Vendor;  /* 309 */
    void* HardwareDevice_DeviceId;  /* 310 */
    void* HardwareDevice_Metadata;  /* 311 */
    void* EpDevice_EpName;  /* 312 */
    void* EpDevice_EpVendor;  /* 313 */
    void* EpDevice_EpMetadata;  /* 314 */
    void* EpDevice_EpOptions;  /* 315 */
    void* EpDevice_Device;  /* 316 */
    const OrtEpApi* (*GetEpApi)(void);  /* 317 */
    void* GetTensorSizeInBytes;  /* 318 */
    void* AllocatorGetStats;  /* 319 */
    void* CreateMemoryInfo_V2;  /* 320 */
    void* MemoryInfoGetDeviceMemType;  /* 321 */
    void* MemoryInfoGetVendorId;  /* 322 */
    OrtStatus* (*ValueInfo_GetValueProducer)(const OrtValueInfo* value_info, const OrtNode** producer_node, size_t* producer_output_index);  /* 323 */
    OrtStatus* (*ValueInfo_GetValueNumConsumers)(const OrtValueInfo* value_info, size_t* num_consumers);  /* 324 */
    OrtStatus* (*ValueInfo_GetValueConsumers)(const OrtValueInfo* value_info, const OrtNode** nodes, int64_t* input_indices, size_t num_consumers);  /* 325 */
    OrtStatus* (*ValueInfo_GetInitializerValue)(const OrtValueInfo* value_info, const OrtValue** initializer_value);  /* 326 */
    void* ValueInfo_GetExternalInitializerInfo;  /* 327 */
    void* ValueInfo_IsRequiredGraphInput;  /* 328 */
    void* ValueInfo_IsOptionalGraphInput;  /* 329 */
    OrtStatus* (*ValueInfo_IsGraphOutput)(const OrtValueInfo* value_info, bool* is_graph_output);  /* 330 */
    OrtStatus* (*ValueInfo_IsConstantInitializer)(const OrtValueInfo* value_info, bool* is_constant_initializer);  /* 331 */
    void* ValueInfo_IsFromOuterScope;  /* 332 */
    void* Graph_GetName;  /* 333 */
    OrtStatus* (*Graph_GetModelPath)(const OrtGraph* graph, const char** model_path);  /* 334 */
    void* Graph_GetOnnxIRVersion;  /* 335 */
    void* Graph_GetNumOperatorSets;  /* 336 */
    void* Graph_GetOperatorSets;  /* 337 */
    OrtStatus* (*Graph_GetNumInputs)(const OrtGraph* graph, size_t* num_inputs);  /* 338 */
    OrtStatus* (*Graph_GetInputs)(const OrtGraph* graph, const OrtValueInfo** inputs, size_t num_inputs);  /* 339 */
    OrtStatus* (*Graph_GetNumOutputs)(const OrtGraph* graph, size_t* num_outputs);  /* 340 */
    OrtStatus* (*Graph_GetOutputs)(const OrtGraph* graph, const OrtValueInfo** outputs, size_t num_outputs);  /* 341 */
    void* Graph_GetNumInitializers;  /* 342 */
    void* Graph_GetInitializers;  /* 343 */
    OrtStatus* (*Graph_GetNumNodes)(const OrtGraph* graph, size_t* num_nodes);  /* 344 */
    OrtStatus* (*Graph_GetNodes)(const OrtGraph* graph, const OrtNode** nodes, size_t num_nodes);  /* 345 */
    void* Graph_GetParentNode;  /* 346 */
    void* Graph_GetGraphView;  /* 347 */
    void* Node_GetId;  /* 348 */
    OrtStatus* (*Node_GetName)(const OrtNode* node, const char** node_name);  /* 349 */
    OrtStatus* (*Node_GetOperatorType)(const OrtNode* node, const char** operator_type);  /* 350 */
    OrtStatus* (*Node_GetDomain)(const OrtNode* node, const char** domain_name);  /* 351 */
    OrtStatus* (*Node_GetSinceVersion)(const OrtNode* node, int* since_version);  /* 352 */
    OrtStatus* (*Node_GetNumInputs)(const OrtNode* node, size_t* num_inputs);  /* 353 */
    OrtStatus* (*Node_GetInputs)(const OrtNode* node, const OrtValueInfo** inputs, size_t num_inputs);  /* 354 */
    OrtStatus* (*Node_GetNumOutputs)(const OrtNode* node, size_t* num_outputs);  /* 355 */
    OrtStatus* (*Node_GetOutputs)(const OrtNode* node, const OrtValueInfo** outputs, size_t num_outputs);  /* 356 */
    void* Node_GetNumImplicitInputs;  /* 357 */
    void* Node_GetImplicitInputs;  /* 358 */
    OrtStatus* (*Node_GetNumAttributes)(const OrtNode* node, size_t* num_attributes);  /* 359 */
    OrtStatus* (*Node_GetAttributes)(const OrtNode* node, const OrtOpAttr** attributes, size_t num_attributes);  /* 360 */
    OrtStatus* (*Node_GetAttributeByName)(const OrtNode* node, const char* name, const OrtOpAttr** attr);  /* 361 */
    void* OpAttr_GetTensorAttributeAsOrtValue;  /* 362 */
    OrtStatus* (*OpAttr_GetType)(const OrtOpAttr* attribute, OrtOpAttrType* type);  /* 363 */
    OrtStatus* (*OpAttr_GetName)(const OrtOpAttr* attribute, const char** name);  /* 364 */
    void* Node_GetNumSubgraphs;  /* 365 */
    void* Node_GetSubgraphs;  /* 366 */
    void* Node_GetGraph;  /* 367 */
    void* Node_GetEpName;  /* 368 */
    void* ReleaseExternalInitializerInfo;  /* 369 */
    void* ExternalInitializerInfo_GetFilePath;  /* 370 */
    void* ExternalInitializerInfo_GetFileOffset;  /* 371 */
    void* ExternalInitializerInfo_GetByteSize;  /* 372 */
    void* GetRunConfigEntry;  /* 373 */
    void* EpDevice_MemoryInfo;  /* 374 */
    void* CreateSharedAllocator;  /* 375 */
    void* GetSharedAllocator;  /* 376 */
    void* ReleaseSharedAllocator;  /* 377 */
    OrtStatus* (*GetTensorData)(const OrtValue* value, const void** out);  /* 378 */
    void* GetSessionOptionsConfigEntries;  /* 379 */
    void* SessionGetMemoryInfoForInputs;  /* 380 */
    void* SessionGetMemoryInfoForOutputs;  /* 381 */
    void* SessionGetEpDeviceForInputs;  /* 382 */
    void* CreateSyncStreamForEpDevice;  /* 383 */
    void* SyncStream_GetHandle;  /* 384 */
    void* ReleaseSyncStream;  /* 385 */
    void* CopyTensors;  /* 386 */
    void* Graph_GetModelMetadata;  /* 387 */
    void* GetModelCompatibilityForEpDevices;  /* 388 */
    void* CreateExternalInitializerInfo;  /* 389 */
    void* TensorTypeAndShape_HasShape;  /* 390 */
    void* KernelInfo_GetConfigEntries;  /* 391 */
    void* KernelInfo_GetOperatorDomain;  /* 392 */
    void* KernelInfo_GetOperatorType;  /* 393 */
    void* KernelInfo_GetOperatorSinceVersion;  /* 394 */
    void* GetInteropApi;  /* 395 */
    void* SessionGetEpDeviceForOutputs;  /* 396 */
    void* GetNumHardwareDevices;  /* 397 */
    void* GetHardwareDevices;  /* 398 */
    void* GetHardwareDeviceEpIncompatibilityDetails;  /* 399 */
    void* DeviceEpIncompatibilityDetails_GetReasonsBitmask;  /* 400 */
    void* DeviceEpIncompatibilityDetails_GetNotes;  /* 401 */
    void* DeviceEpIncompatibilityDetails_GetErrorCode;  /* 402 */
    void* ReleaseDeviceEpIncompatibilityDetails;  /* 403 */
    void* CreateEnvWithOptions;  /* 404 */
    void* Session_GetEpGraphAssignmentInfo;  /* 405 */
    void* EpAssignedSubgraph_GetEpName;  /* 406 */
    void* EpAssignedSubgraph_GetNodes;  /* 407 */
    void* EpAssignedNode_GetName;  /* 408 */
    void* EpAssignedNode_GetDomain;  /* 409 */
    void* EpAssignedNode_GetOperatorType;  /* 410 */
    void* RunOptionsSetSyncStream;  /* 411 */
};

struct OrtEpApi {
    OrtStatus* (*CreateEpDevice)(OrtEpFactory* ep_factory, const OrtHardwareDevice* hardware_device, const OrtKeyValuePairs* ep_metadata, const OrtKeyValuePairs* ep_options, OrtEpDevice** ep_device);  /* 0 */
    void* ReleaseEpDevice;  /* 1 */
    OrtStatus* (*EpGraphSupportInfo_AddNodesToFuse)(OrtEpGraphSupportInfo* graph_support_info, const OrtNode* const* nodes, size_t num_nodes, const OrtNodeFusionOptions* node_fusion_options);  /* 2 */
    OrtStatus* (*EpGraphSupportInfo_AddSingleNode)(OrtEpGraphSupportInfo* graph_support_info, const OrtNode* node);  /* 3 */
    const char* (*NodeComputeContext_NodeName)(const OrtNodeComputeContext* context);  /* 4 */
    void* EpDevice_AddAllocatorInfo;  /* 5 */
    void* MemoryInfo_GetMemoryDevice;  /* 6 */
    void* Value_GetMemoryDevice;  /* 7 */
    void* MemoryDevice_AreEqual;  /* 8 */
    void* MemoryDevice_GetDeviceType;  /* 9 */
    void* MemoryDevice_GetMemoryType;  /* 10 */
    void* MemoryDevice_GetVendorId;  /* 11 */
    void* MemoryDevice_GetDeviceId;  /* 12 */
    void* SyncStream_GetImpl;  /* 13 */
    void* SyncStream_GetSyncId;  /* 14 */
    void* GetSyncIdForLastWaitOnSyncStream;  /* 15 */
    void* CreateHardwareDevice;  /* 16 */
    void* ReleaseHardwareDevice;  /* 17 */
    OrtStatus* (*CreateKernelRegistry)(OrtKernelRegistry** kernel_registry);  /* 18 */
    void (*ReleaseKernelRegistry)(OrtKernelRegistry* kernel_registry);  /* 19 */
    OrtStatus* (*KernelRegistry_AddKernel)(OrtKernelRegistry* kernel_registry, const OrtKernelDef* kernel_def, OrtKernelCreateFunc kernel_create_func, void* kernel_create_func_state);  /* 20 */
    OrtStatus* (*CreateKernelDefBuilder)(OrtKernelDefBuilder** kernel_def_builder_out);  /* 21 */
    void (*ReleaseKernelDefBuilder)(OrtKernelDefBuilder* kernel_def_builder);  /* 22 */
    OrtStatus* (*KernelDefBuilder_SetOperatorType)(OrtKernelDefBuilder* kernel_def_builder, const char* op_type);  /* 23 */
    OrtStatus* (*KernelDefBuilder_SetDomain)(OrtKernelDefBuilder* kernel_def_builder, const char* domain);  /* 24 */
    OrtStatus* (*KernelDefBuilder_SetSinceVersion)(OrtKernelDefBuilder* kernel_def_builder, int since_version_start, int since_version_end);  /* 25 */
    OrtStatus* (*KernelDefBuilder_SetExecutionProvider)(OrtKernelDefBuilder* kernel_def_builder, const char* ep_name);  /* 26 */
    void* KernelDefBuilder_SetInputMemType;  /* 27 */
    void* KernelDefBuilder_SetOutputMemType;  /* 28 */
    OrtStatus* (*KernelDefBuilder_AddTypeConstraint)(OrtKernelDefBuilder* kernel_def_builder, const char* arg_name, const OrtDataType* const* types, size_t num_types);  /* 29 */
    void* KernelDefBuilder_AddInputOutputAliases;  /* 30 */
    OrtStatus* (*KernelDefBuilder_AddInputOutputMutableAliases)(OrtKernelDefBuilder* kernel_def_builder, const int* input_indices, const int* output_indices, size_t num_io_indices);  /* 31 */
    OrtStatus* (*KernelDefBuilder_Build)(OrtKernelDefBuilder* kernel_def_builder, OrtKernelDef** kernel_def_out);  /* 32 */
    void (*ReleaseKernelDef)(OrtKernelDef* kernel_def);  /* 33 */
    void* KernelDef_GetOperatorType;  /* 34 */
    void* KernelDef_GetDomain;  /* 35 */
    void* KernelDef_GetSinceVersion;  /* 36 */
    void* KernelDef_GetExecutionProvider;  /* 37 */
    void* KernelDef_GetInputMemType;  /* 38 */
    void* KernelDef_GetOutputMemType;  /* 39 */
    OrtStatus* (*GetTensorDataType)(ONNXTensorElementDataType elem_type, const OrtDataType** out);  /* 40 */
    OrtStatus* (*EpGraphSupportInfo_LookUpKernel)(OrtEpGraphSupportInfo* graph_support_info, const OrtNode* node, const OrtKernelDef** out_kernel_def);  /* 41 */
    OrtStatus* (*SharedPrePackedWeightCache_StoreWeightData)(OrtSharedPrePackedWeightCache* prepacked_weight_cache, void** buffer_data_ptrs, size_t* buffer_data_sizes, size_t num_buffers);  /* 42 */
    OrtStatus* (*KernelInfo_GetEp)(const OrtKernelInfo* info, const OrtEp** ep);  /* 43 */
    void* DeviceEpIncompatibilityDetails_SetDetails;  /* 44 */
    void* CreateIfKernel;  /* 45 */
    void* CreateLoopKernel;  /* 46 */
    void* CreateScanKernel;  /* 47 */
    void* ReleaseKernelImpl;  /* 48 */
    void* GetEnvConfigEntries;  /* 49 */
};

/* OrtKernelImpl, version 24 layout. */
struct OrtKernelImpl {
    uint32_t ort_version_supported;
    uint32_t flags;
    OrtStatus* (*Compute)(OrtKernelImpl* this_ptr, OrtKernelContext* context);
    void (*Release)(OrtKernelImpl* this_ptr);
    OrtStatus* (*PrePackWeight)(OrtKernelImpl* this_ptr, const OrtValue* tensor, int input_index,
                                OrtAllocator* allocator, OrtSharedPrePackedWeightCache* prepacked_weight_cache,
                                bool* is_packed);
    OrtStatus* (*SetSharedPrePackedWeight)(OrtKernelImpl* this_ptr, const void* const* buffer_data_ptrs,
                                           const size_t* buffer_data_sizes, size_t num_buffers, int input_index);
};

/* OrtModelEditorApi (onnxruntime_c_api.h; append-only, never versioned by slot): the slots up to CreateNode, which
   OrtEp::Compile uses to return EPContext nodes. */
typedef struct OrtModelEditorApi {
    void* CreateTensorTypeInfo;  /* 0 */
    void* CreateSparseTensorTypeInfo;  /* 1 */
    void* CreateMapTypeInfo;  /* 2 */
    void* CreateSequenceTypeInfo;  /* 3 */
    void* CreateOptionalTypeInfo;  /* 4 */
    void* CreateValueInfo;  /* 5 */
    OrtStatus* (*CreateNode)(const char* operator_name, const char* domain_name, const char* node_name,
                             const char* const* input_names, size_t input_names_len,
                             const char* const* output_names, size_t output_names_len,
                             OrtOpAttr** attributes, size_t attribs_len, OrtNode** node);  /* 6 */
} OrtModelEditorApi;

/* OrtEp, version 24 layout (IsConcurrentRunSupported is version 24's last slot). */
struct OrtEp {
    uint32_t ort_version_supported;
    const char* (*GetName)(const OrtEp* this_ptr);
    OrtStatus* (*GetCapability)(OrtEp* this_ptr, const OrtGraph* graph, OrtEpGraphSupportInfo* graph_support_info);
    OrtStatus* (*Compile)(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                          OrtNodeComputeInfo** node_compute_infos, OrtNode** ep_context_nodes);
    void (*ReleaseNodeComputeInfos)(OrtEp* this_ptr, OrtNodeComputeInfo** node_compute_infos,
                                    size_t num_node_compute_infos);
    OrtStatus* (*GetPreferredDataLayout)(OrtEp* this_ptr, OrtEpDataLayout* preferred_data_layout);
    OrtStatus* (*ShouldConvertDataLayoutForOp)(OrtEp* this_ptr, const char* domain, const char* op_type,
                                               OrtEpDataLayout target_data_layout, int* should_convert);
    OrtStatus* (*SetDynamicOptions)(OrtEp* this_ptr, const char* const* option_keys,
                                    const char* const* option_values, size_t num_options);
    OrtStatus* (*OnRunStart)(OrtEp* this_ptr, const OrtRunOptions* run_options);
    OrtStatus* (*OnRunEnd)(OrtEp* this_ptr, const OrtRunOptions* run_options, bool sync_stream);
    OrtStatus* (*CreateAllocator)(OrtEp* this_ptr, const OrtMemoryInfo* memory_info, OrtAllocator** allocator);
    OrtStatus* (*CreateSyncStreamForDevice)(OrtEp* this_ptr, const OrtMemoryDevice* memory_device,
                                            OrtSyncStreamImpl** stream);
    const char* (*GetCompiledModelCompatibilityInfo)(OrtEp* this_ptr, const OrtGraph* graph);
    OrtStatus* (*GetKernelRegistry)(OrtEp* this_ptr, const OrtKernelRegistry** kernel_registry);
    OrtStatus* (*IsConcurrentRunSupported)(OrtEp* this_ptr, bool* is_supported);
};

/* OrtEpFactory, version 24 layout (GetCustomOpDomains is version 24's last slot). */
struct OrtEpFactory {
    uint32_t ort_version_supported;
    const char* (*GetName)(const OrtEpFactory* this_ptr);
    const char* (*GetVendor)(const OrtEpFactory* this_ptr);
    OrtStatus* (*GetSupportedDevices)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                      size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                      size_t* num_ep_devices);
    OrtStatus* (*CreateEp)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                           const OrtKeyValuePairs* const* ep_metadata_pairs, size_t num_devices,
                           const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** ep);
    void (*ReleaseEp)(OrtEpFactory* this_ptr, OrtEp* ep);
    uint32_t (*GetVendorId)(const OrtEpFactory* this_ptr);
    const char* (*GetVersion)(const OrtEpFactory* this_ptr);
    OrtStatus* (*ValidateCompiledModelCompatibilityInfo)(OrtEpFactory* this_ptr,
                                                         const OrtHardwareDevice* const* devices, size_t num_devices,
                                                         const char* compatibility_info,
                                                         OrtCompiledModelCompatibility* model_compatibility);
    OrtStatus* (*CreateAllocator)(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                  const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator);
    void (*ReleaseAllocator)(OrtEpFactory* this_ptr, OrtAllocator* allocator);
    OrtStatus* (*CreateDataTransfer)(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer);
    bool (*IsStreamAware)(const OrtEpFactory* this_ptr);
    OrtStatus* (*CreateSyncStreamForDevice)(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                            const OrtKeyValuePairs* stream_options, OrtSyncStreamImpl** stream);
    OrtStatus* (*GetHardwareDeviceIncompatibilityDetails)(OrtEpFactory* this_ptr, const OrtHardwareDevice* hw,
                                                          OrtDeviceEpIncompatibilityDetails* details);
    OrtStatus* (*CreateExternalResourceImporterForDevice)(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                                          OrtExternalResourceImporterImpl** out_importer);
    OrtStatus* (*GetNumCustomOpDomains)(OrtEpFactory* this_ptr, size_t* num_domains);
    OrtStatus* (*GetCustomOpDomains)(OrtEpFactory* this_ptr, OrtCustomOpDomain** domains, size_t num_domains);
};

/* ---- onnxep's own state (all of it lives in these structs: the module's initialisers may not have run when
   onnxruntime loads the library before Python imports it) ---- */

/* Kernels registered by the plugin: op ids, mapped to onnxep's kernel codes in _k_ort_plugin.pxi. */
enum {
    ONNXEP_PK_RELU = 0, ONNXEP_PK_LEAKY_RELU, ONNXEP_PK_SIGMOID, ONNXEP_PK_TANH, ONNXEP_PK_EXP, ONNXEP_PK_SQRT,
    ONNXEP_PK_NEG, ONNXEP_PK_ABS, ONNXEP_PK_HARD_SIGMOID, ONNXEP_PK_HARD_SWISH,
    ONNXEP_PK_ADD, ONNXEP_PK_SUB, ONNXEP_PK_MUL, ONNXEP_PK_DIV, ONNXEP_PK_MAX, ONNXEP_PK_MIN,
    ONNXEP_PK_SOFTMAX, ONNXEP_PK_LOG_SOFTMAX,
    ONNXEP_PK_CONV, ONNXEP_PK_GEMM, ONNXEP_PK_MATMUL,
    ONNXEP_PK_COUNT
};

typedef struct onnxep_plugin_op {
    const char* op_type;
    int since_start, since_end;  /* one ONNX schema version: [since, next since - 1], the newest up to INT_MAX */
    int kind;                    /* ONNXEP_PK_* */
} onnxep_plugin_op;

/* ONNX domain, float32 ("T"), one row per schema version whose float semantics the kernel implements (onnxruntime
   matches an open range [s, INT_MAX] only to nodes of since-version s, so each version is listed; a future version
   is not claimed until it is added here). Left out: versions 1-5 (`consumed_inputs`), Max / Min before 8 (no
   broadcasting). */
#define ONNXEP_PLUGIN_NROWS 55
static const onnxep_plugin_op onnxep_plugin_ops[] = {
    {"Relu", 6, 12, ONNXEP_PK_RELU},
    {"Relu", 13, 13, ONNXEP_PK_RELU},
    {"Relu", 14, 0x7fffffff, ONNXEP_PK_RELU},
    {"LeakyRelu", 6, 15, ONNXEP_PK_LEAKY_RELU},
    {"LeakyRelu", 16, 0x7fffffff, ONNXEP_PK_LEAKY_RELU},
    {"Sigmoid", 6, 12, ONNXEP_PK_SIGMOID},
    {"Sigmoid", 13, 0x7fffffff, ONNXEP_PK_SIGMOID},
    {"Tanh", 6, 12, ONNXEP_PK_TANH},
    {"Tanh", 13, 0x7fffffff, ONNXEP_PK_TANH},
    {"Exp", 6, 12, ONNXEP_PK_EXP},
    {"Exp", 13, 0x7fffffff, ONNXEP_PK_EXP},
    {"Sqrt", 6, 12, ONNXEP_PK_SQRT},
    {"Sqrt", 13, 0x7fffffff, ONNXEP_PK_SQRT},
    {"Neg", 6, 12, ONNXEP_PK_NEG},
    {"Neg", 13, 0x7fffffff, ONNXEP_PK_NEG},
    {"Abs", 6, 12, ONNXEP_PK_ABS},
    {"Abs", 13, 0x7fffffff, ONNXEP_PK_ABS},
    {"HardSigmoid", 6, 21, ONNXEP_PK_HARD_SIGMOID},
    {"HardSigmoid", 22, 0x7fffffff, ONNXEP_PK_HARD_SIGMOID},
    {"HardSwish", 14, 21, ONNXEP_PK_HARD_SWISH},
    {"HardSwish", 22, 0x7fffffff, ONNXEP_PK_HARD_SWISH},
    {"Add", 7, 12, ONNXEP_PK_ADD},
    {"Add", 13, 13, ONNXEP_PK_ADD},
    {"Add", 14, 0x7fffffff, ONNXEP_PK_ADD},
    {"Sub", 7, 12, ONNXEP_PK_SUB},
    {"Sub", 13, 13, ONNXEP_PK_SUB},
    {"Sub", 14, 0x7fffffff, ONNXEP_PK_SUB},
    {"Mul", 7, 12, ONNXEP_PK_MUL},
    {"Mul", 13, 13, ONNXEP_PK_MUL},
    {"Mul", 14, 0x7fffffff, ONNXEP_PK_MUL},
    {"Div", 7, 12, ONNXEP_PK_DIV},
    {"Div", 13, 13, ONNXEP_PK_DIV},
    {"Div", 14, 0x7fffffff, ONNXEP_PK_DIV},
    {"Max", 8, 11, ONNXEP_PK_MAX},
    {"Max", 12, 12, ONNXEP_PK_MAX},
    {"Max", 13, 0x7fffffff, ONNXEP_PK_MAX},
    {"Min", 8, 11, ONNXEP_PK_MIN},
    {"Min", 12, 12, ONNXEP_PK_MIN},
    {"Min", 13, 0x7fffffff, ONNXEP_PK_MIN},
    {"Softmax", 1, 10, ONNXEP_PK_SOFTMAX},
    {"Softmax", 11, 12, ONNXEP_PK_SOFTMAX},
    {"Softmax", 13, 0x7fffffff, ONNXEP_PK_SOFTMAX},
    {"LogSoftmax", 1, 10, ONNXEP_PK_LOG_SOFTMAX},
    {"LogSoftmax", 11, 12, ONNXEP_PK_LOG_SOFTMAX},
    {"LogSoftmax", 13, 0x7fffffff, ONNXEP_PK_LOG_SOFTMAX},
    {"Conv", 1, 10, ONNXEP_PK_CONV},
    {"Conv", 11, 21, ONNXEP_PK_CONV},
    {"Conv", 22, 0x7fffffff, ONNXEP_PK_CONV},
    {"Gemm", 7, 8, ONNXEP_PK_GEMM},
    {"Gemm", 9, 10, ONNXEP_PK_GEMM},
    {"Gemm", 11, 12, ONNXEP_PK_GEMM},
    {"Gemm", 13, 0x7fffffff, ONNXEP_PK_GEMM},
    {"MatMul", 1, 8, ONNXEP_PK_MATMUL},
    {"MatMul", 9, 12, ONNXEP_PK_MATMUL},
    {"MatMul", 13, 0x7fffffff, ONNXEP_PK_MATMUL},
};

_Static_assert(sizeof(onnxep_plugin_ops) / sizeof(onnxep_plugin_ops[0]) == ONNXEP_PLUGIN_NROWS,
               "ONNXEP_PLUGIN_NROWS must count the rows of onnxep_plugin_ops");

typedef struct onnxep_factory onnxep_factory;

typedef struct onnxep_kstate {       /* kernel_create_func_state of one registered kernel */
    onnxep_factory* factory;
    int kind;
    int since;                       /* the row's first opset version (Softmax before 13 flattens to 2-D) */
} onnxep_kstate;

struct onnxep_factory {
    OrtEpFactory base;               /* first: onnxruntime's OrtEpFactory* is this struct's address */
    const OrtApi* api;
    const OrtEpApi* ep_api;
    OrtKernelRegistry* registry;     /* shared by every OrtEp of this factory; built in CreateEpFactories */
    onnxep_kstate kstates[ONNXEP_PLUGIN_NROWS];
};

/* A Conv / Gemm whose only consumer is an activation the plugin also claims: the activation runs in the GEMM
   epilogue and the activation node becomes a pass-through (its output may share the input's buffer). Keyed by the
   value name between the two nodes (unique in a graph), recorded by GetCapability, read at kernel creation. */
#define ONNXEP_FUSE_NAME_MAX 256
typedef struct onnxep_fused_act {
    char value[ONNXEP_FUSE_NAME_MAX];
    int act_kind;                    /* ONNXEP_ACT_* */
    float a, b;
} onnxep_fused_act;

typedef struct onnxep_ep {
    OrtEp base;
    onnxep_factory* factory;
    onnxep_fused_act* fused;         /* malloc'ed, nfused entries */
    size_t nfused, cap_fused;
    int fuse_acts;                   /* ep option fuse_activations (default 1) */
    int claim_conv;                  /* kernel path: claim lone Conv (EP option claim_conv=1; off: measured slower than the CPU EP) */
    int compile_mode;                /* EP option compile=1: fused partitions run as onnxep plans (OrtEp::Compile) */
    int nthreads;                    /* EP option threads: onnxep's own pool for compiled partitions (0: default) */
    int precision_bf16;              /* EP option precision=bf16: the partitions' onnxep.compute_precision */
    int ctx_enable;                  /* session config ep.context_enable=1: Compile returns EPContext nodes */
    int ctx_embed;                   /* ep.context_embed_mode (0: side file next to the EPContext model) */
    char* ctx_path;                  /* ep.context_file_path (malloc'ed; NULL when not set) */
} onnxep_ep;

typedef struct onnxep_kernel {
    OrtKernelImpl base;
    const OrtApi* api;
    int kind;
    float p0, p1;                    /* LeakyRelu alpha; HardSigmoid alpha, beta */
    int64_t axis;                    /* Softmax / LogSoftmax */
    int since;
    /* Conv / Gemm / MatMul */
    int64_t group, auto_pad;         /* auto_pad: 0 NOTSET, 1 VALID, 2 SAME_UPPER, 3 SAME_LOWER */
    int64_t nks, kshape[3], nstrides, strides[3], ndil, dil[3], npads, pads[6];
    int act_kind;                    /* ONNXEP_ACT_* applied in the epilogue (a fused activation node) */
    float act_a, act_b;
    int trans_a, trans_b;
    float alpha, beta;
    int passthrough;                 /* an activation fused into its producer: copy (or nothing when in place) */
    const float* wp;                 /* the packed weight in use: owned, or onnxruntime's shared buffer */
    float* wp_owned;                 /* packed by this kernel without a shared cache: freed in Release */
    int64_t wdims[5];                /* the packed weight's shape */
    size_t wndim;
} onnxep_kernel;

/* Slot numbers as this header lays them out (offsetof / sizeof(void*)), for the ABI test. */
#define ONNXEP_SLOT(S, m) {#S, #m, (long)(offsetof(struct S, m) / sizeof(void*))}
typedef struct onnxep_abi_slot { const char* type; const char* name; long slot; } onnxep_abi_slot;
static const onnxep_abi_slot onnxep_abi_slots[] = {
    ONNXEP_SLOT(OrtModelEditorApi, CreateNode),
    ONNXEP_SLOT(OrtApi, CreateStatus),
    ONNXEP_SLOT(OrtApi, GetErrorCode),
    ONNXEP_SLOT(OrtApi, GetErrorMessage),
    ONNXEP_SLOT(OrtApi, CreateEnv),
    ONNXEP_SLOT(OrtApi, CreateEnvWithCustomLogger),
    ONNXEP_SLOT(OrtApi, EnableTelemetryEvents),
    ONNXEP_SLOT(OrtApi, DisableTelemetryEvents),
    ONNXEP_SLOT(OrtApi, CreateSession),
    ONNXEP_SLOT(OrtApi, CreateSessionFromArray),
    ONNXEP_SLOT(OrtApi, Run),
    ONNXEP_SLOT(OrtApi, CreateSessionOptions),
    ONNXEP_SLOT(OrtApi, SetOptimizedModelFilePath),
    ONNXEP_SLOT(OrtApi, CloneSessionOptions),
    ONNXEP_SLOT(OrtApi, SetSessionExecutionMode),
    ONNXEP_SLOT(OrtApi, EnableProfiling),
    ONNXEP_SLOT(OrtApi, DisableProfiling),
    ONNXEP_SLOT(OrtApi, EnableMemPattern),
    ONNXEP_SLOT(OrtApi, DisableMemPattern),
    ONNXEP_SLOT(OrtApi, EnableCpuMemArena),
    ONNXEP_SLOT(OrtApi, DisableCpuMemArena),
    ONNXEP_SLOT(OrtApi, SetSessionLogId),
    ONNXEP_SLOT(OrtApi, SetSessionLogVerbosityLevel),
    ONNXEP_SLOT(OrtApi, SetSessionLogSeverityLevel),
    ONNXEP_SLOT(OrtApi, SetSessionGraphOptimizationLevel),
    ONNXEP_SLOT(OrtApi, SetIntraOpNumThreads),
    ONNXEP_SLOT(OrtApi, SetInterOpNumThreads),
    ONNXEP_SLOT(OrtApi, CreateCustomOpDomain),
    ONNXEP_SLOT(OrtApi, CustomOpDomain_Add),
    ONNXEP_SLOT(OrtApi, AddCustomOpDomain),
    ONNXEP_SLOT(OrtApi, RegisterCustomOpsLibrary),
    ONNXEP_SLOT(OrtApi, SessionGetInputCount),
    ONNXEP_SLOT(OrtApi, SessionGetOutputCount),
    ONNXEP_SLOT(OrtApi, SessionGetOverridableInitializerCount),
    ONNXEP_SLOT(OrtApi, SessionGetInputTypeInfo),
    ONNXEP_SLOT(OrtApi, SessionGetOutputTypeInfo),
    ONNXEP_SLOT(OrtApi, SessionGetOverridableInitializerTypeInfo),
    ONNXEP_SLOT(OrtApi, SessionGetInputName),
    ONNXEP_SLOT(OrtApi, SessionGetOutputName),
    ONNXEP_SLOT(OrtApi, SessionGetOverridableInitializerName),
    ONNXEP_SLOT(OrtApi, CreateRunOptions),
    ONNXEP_SLOT(OrtApi, RunOptionsSetRunLogVerbosityLevel),
    ONNXEP_SLOT(OrtApi, RunOptionsSetRunLogSeverityLevel),
    ONNXEP_SLOT(OrtApi, RunOptionsSetRunTag),
    ONNXEP_SLOT(OrtApi, RunOptionsGetRunLogVerbosityLevel),
    ONNXEP_SLOT(OrtApi, RunOptionsGetRunLogSeverityLevel),
    ONNXEP_SLOT(OrtApi, RunOptionsGetRunTag),
    ONNXEP_SLOT(OrtApi, RunOptionsSetTerminate),
    ONNXEP_SLOT(OrtApi, RunOptionsUnsetTerminate),
    ONNXEP_SLOT(OrtApi, CreateTensorAsOrtValue),
    ONNXEP_SLOT(OrtApi, CreateTensorWithDataAsOrtValue),
    ONNXEP_SLOT(OrtApi, IsTensor),
    ONNXEP_SLOT(OrtApi, GetTensorMutableData),
    ONNXEP_SLOT(OrtApi, FillStringTensor),
    ONNXEP_SLOT(OrtApi, GetStringTensorDataLength),
    ONNXEP_SLOT(OrtApi, GetStringTensorContent),
    ONNXEP_SLOT(OrtApi, CastTypeInfoToTensorInfo),
    ONNXEP_SLOT(OrtApi, GetOnnxTypeFromTypeInfo),
    ONNXEP_SLOT(OrtApi, CreateTensorTypeAndShapeInfo),
    ONNXEP_SLOT(OrtApi, SetTensorElementType),
    ONNXEP_SLOT(OrtApi, SetDimensions),
    ONNXEP_SLOT(OrtApi, GetTensorElementType),
    ONNXEP_SLOT(OrtApi, GetDimensionsCount),
    ONNXEP_SLOT(OrtApi, GetDimensions),
    ONNXEP_SLOT(OrtApi, GetSymbolicDimensions),
    ONNXEP_SLOT(OrtApi, GetTensorShapeElementCount),
    ONNXEP_SLOT(OrtApi, GetTensorTypeAndShape),
    ONNXEP_SLOT(OrtApi, GetTypeInfo),
    ONNXEP_SLOT(OrtApi, GetValueType),
    ONNXEP_SLOT(OrtApi, CreateMemoryInfo),
    ONNXEP_SLOT(OrtApi, CreateCpuMemoryInfo),
    ONNXEP_SLOT(OrtApi, CompareMemoryInfo),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetName),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetId),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetMemType),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetType),
    ONNXEP_SLOT(OrtApi, AllocatorAlloc),
    ONNXEP_SLOT(OrtApi, AllocatorFree),
    ONNXEP_SLOT(OrtApi, AllocatorGetInfo),
    ONNXEP_SLOT(OrtApi, GetAllocatorWithDefaultOptions),
    ONNXEP_SLOT(OrtApi, AddFreeDimensionOverride),
    ONNXEP_SLOT(OrtApi, GetValue),
    ONNXEP_SLOT(OrtApi, GetValueCount),
    ONNXEP_SLOT(OrtApi, CreateValue),
    ONNXEP_SLOT(OrtApi, CreateOpaqueValue),
    ONNXEP_SLOT(OrtApi, GetOpaqueValue),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAttribute_float),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAttribute_int64),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAttribute_string),
    ONNXEP_SLOT(OrtApi, KernelContext_GetInputCount),
    ONNXEP_SLOT(OrtApi, KernelContext_GetOutputCount),
    ONNXEP_SLOT(OrtApi, KernelContext_GetInput),
    ONNXEP_SLOT(OrtApi, KernelContext_GetOutput),
    ONNXEP_SLOT(OrtApi, ReleaseEnv),
    ONNXEP_SLOT(OrtApi, ReleaseStatus),
    ONNXEP_SLOT(OrtApi, ReleaseMemoryInfo),
    ONNXEP_SLOT(OrtApi, ReleaseSession),
    ONNXEP_SLOT(OrtApi, ReleaseValue),
    ONNXEP_SLOT(OrtApi, ReleaseRunOptions),
    ONNXEP_SLOT(OrtApi, ReleaseTypeInfo),
    ONNXEP_SLOT(OrtApi, ReleaseTensorTypeAndShapeInfo),
    ONNXEP_SLOT(OrtApi, ReleaseSessionOptions),
    ONNXEP_SLOT(OrtApi, ReleaseCustomOpDomain),
    ONNXEP_SLOT(OrtApi, GetDenotationFromTypeInfo),
    ONNXEP_SLOT(OrtApi, CastTypeInfoToMapTypeInfo),
    ONNXEP_SLOT(OrtApi, CastTypeInfoToSequenceTypeInfo),
    ONNXEP_SLOT(OrtApi, GetMapKeyType),
    ONNXEP_SLOT(OrtApi, GetMapValueType),
    ONNXEP_SLOT(OrtApi, GetSequenceElementType),
    ONNXEP_SLOT(OrtApi, ReleaseMapTypeInfo),
    ONNXEP_SLOT(OrtApi, ReleaseSequenceTypeInfo),
    ONNXEP_SLOT(OrtApi, SessionEndProfiling),
    ONNXEP_SLOT(OrtApi, SessionGetModelMetadata),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetProducerName),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetGraphName),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetDomain),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetDescription),
    ONNXEP_SLOT(OrtApi, ModelMetadataLookupCustomMetadataMap),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetVersion),
    ONNXEP_SLOT(OrtApi, ReleaseModelMetadata),
    ONNXEP_SLOT(OrtApi, CreateEnvWithGlobalThreadPools),
    ONNXEP_SLOT(OrtApi, DisablePerSessionThreads),
    ONNXEP_SLOT(OrtApi, CreateThreadingOptions),
    ONNXEP_SLOT(OrtApi, ReleaseThreadingOptions),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetCustomMetadataMapKeys),
    ONNXEP_SLOT(OrtApi, AddFreeDimensionOverrideByName),
    ONNXEP_SLOT(OrtApi, GetAvailableProviders),
    ONNXEP_SLOT(OrtApi, ReleaseAvailableProviders),
    ONNXEP_SLOT(OrtApi, GetStringTensorElementLength),
    ONNXEP_SLOT(OrtApi, GetStringTensorElement),
    ONNXEP_SLOT(OrtApi, FillStringTensorElement),
    ONNXEP_SLOT(OrtApi, AddSessionConfigEntry),
    ONNXEP_SLOT(OrtApi, CreateAllocator),
    ONNXEP_SLOT(OrtApi, ReleaseAllocator),
    ONNXEP_SLOT(OrtApi, RunWithBinding),
    ONNXEP_SLOT(OrtApi, CreateIoBinding),
    ONNXEP_SLOT(OrtApi, ReleaseIoBinding),
    ONNXEP_SLOT(OrtApi, BindInput),
    ONNXEP_SLOT(OrtApi, BindOutput),
    ONNXEP_SLOT(OrtApi, BindOutputToDevice),
    ONNXEP_SLOT(OrtApi, GetBoundOutputNames),
    ONNXEP_SLOT(OrtApi, GetBoundOutputValues),
    ONNXEP_SLOT(OrtApi, ClearBoundInputs),
    ONNXEP_SLOT(OrtApi, ClearBoundOutputs),
    ONNXEP_SLOT(OrtApi, TensorAt),
    ONNXEP_SLOT(OrtApi, CreateAndRegisterAllocator),
    ONNXEP_SLOT(OrtApi, SetLanguageProjection),
    ONNXEP_SLOT(OrtApi, SessionGetProfilingStartTimeNs),
    ONNXEP_SLOT(OrtApi, SetGlobalIntraOpNumThreads),
    ONNXEP_SLOT(OrtApi, SetGlobalInterOpNumThreads),
    ONNXEP_SLOT(OrtApi, SetGlobalSpinControl),
    ONNXEP_SLOT(OrtApi, AddInitializer),
    ONNXEP_SLOT(OrtApi, CreateEnvWithCustomLoggerAndGlobalThreadPools),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_CUDA),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_ROCM),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_OpenVINO),
    ONNXEP_SLOT(OrtApi, SetGlobalDenormalAsZero),
    ONNXEP_SLOT(OrtApi, CreateArenaCfg),
    ONNXEP_SLOT(OrtApi, ReleaseArenaCfg),
    ONNXEP_SLOT(OrtApi, ModelMetadataGetGraphDescription),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_TensorRT),
    ONNXEP_SLOT(OrtApi, SetCurrentGpuDeviceId),
    ONNXEP_SLOT(OrtApi, GetCurrentGpuDeviceId),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAttributeArray_float),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAttributeArray_int64),
    ONNXEP_SLOT(OrtApi, CreateArenaCfgV2),
    ONNXEP_SLOT(OrtApi, AddRunConfigEntry),
    ONNXEP_SLOT(OrtApi, CreatePrepackedWeightsContainer),
    ONNXEP_SLOT(OrtApi, ReleasePrepackedWeightsContainer),
    ONNXEP_SLOT(OrtApi, CreateSessionWithPrepackedWeightsContainer),
    ONNXEP_SLOT(OrtApi, CreateSessionFromArrayWithPrepackedWeightsContainer),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_TensorRT_V2),
    ONNXEP_SLOT(OrtApi, CreateTensorRTProviderOptions),
    ONNXEP_SLOT(OrtApi, UpdateTensorRTProviderOptions),
    ONNXEP_SLOT(OrtApi, GetTensorRTProviderOptionsAsString),
    ONNXEP_SLOT(OrtApi, ReleaseTensorRTProviderOptions),
    ONNXEP_SLOT(OrtApi, EnableOrtCustomOps),
    ONNXEP_SLOT(OrtApi, RegisterAllocator),
    ONNXEP_SLOT(OrtApi, UnregisterAllocator),
    ONNXEP_SLOT(OrtApi, IsSparseTensor),
    ONNXEP_SLOT(OrtApi, CreateSparseTensorAsOrtValue),
    ONNXEP_SLOT(OrtApi, FillSparseTensorCoo),
    ONNXEP_SLOT(OrtApi, FillSparseTensorCsr),
    ONNXEP_SLOT(OrtApi, FillSparseTensorBlockSparse),
    ONNXEP_SLOT(OrtApi, CreateSparseTensorWithValuesAsOrtValue),
    ONNXEP_SLOT(OrtApi, UseCooIndices),
    ONNXEP_SLOT(OrtApi, UseCsrIndices),
    ONNXEP_SLOT(OrtApi, UseBlockSparseIndices),
    ONNXEP_SLOT(OrtApi, GetSparseTensorFormat),
    ONNXEP_SLOT(OrtApi, GetSparseTensorValuesTypeAndShape),
    ONNXEP_SLOT(OrtApi, GetSparseTensorValues),
    ONNXEP_SLOT(OrtApi, GetSparseTensorIndicesTypeShape),
    ONNXEP_SLOT(OrtApi, GetSparseTensorIndices),
    ONNXEP_SLOT(OrtApi, HasValue),
    ONNXEP_SLOT(OrtApi, KernelContext_GetGPUComputeStream),
    ONNXEP_SLOT(OrtApi, GetTensorMemoryInfo),
    ONNXEP_SLOT(OrtApi, GetExecutionProviderApi),
    ONNXEP_SLOT(OrtApi, SessionOptionsSetCustomCreateThreadFn),
    ONNXEP_SLOT(OrtApi, SessionOptionsSetCustomThreadCreationOptions),
    ONNXEP_SLOT(OrtApi, SessionOptionsSetCustomJoinThreadFn),
    ONNXEP_SLOT(OrtApi, SetGlobalCustomCreateThreadFn),
    ONNXEP_SLOT(OrtApi, SetGlobalCustomThreadCreationOptions),
    ONNXEP_SLOT(OrtApi, SetGlobalCustomJoinThreadFn),
    ONNXEP_SLOT(OrtApi, SynchronizeBoundInputs),
    ONNXEP_SLOT(OrtApi, SynchronizeBoundOutputs),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_CUDA_V2),
    ONNXEP_SLOT(OrtApi, CreateCUDAProviderOptions),
    ONNXEP_SLOT(OrtApi, UpdateCUDAProviderOptions),
    ONNXEP_SLOT(OrtApi, GetCUDAProviderOptionsAsString),
    ONNXEP_SLOT(OrtApi, ReleaseCUDAProviderOptions),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_MIGraphX),
    ONNXEP_SLOT(OrtApi, AddExternalInitializers),
    ONNXEP_SLOT(OrtApi, CreateOpAttr),
    ONNXEP_SLOT(OrtApi, ReleaseOpAttr),
    ONNXEP_SLOT(OrtApi, CreateOp),
    ONNXEP_SLOT(OrtApi, InvokeOp),
    ONNXEP_SLOT(OrtApi, ReleaseOp),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider),
    ONNXEP_SLOT(OrtApi, CopyKernelInfo),
    ONNXEP_SLOT(OrtApi, ReleaseKernelInfo),
    ONNXEP_SLOT(OrtApi, GetTrainingApi),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_CANN),
    ONNXEP_SLOT(OrtApi, CreateCANNProviderOptions),
    ONNXEP_SLOT(OrtApi, UpdateCANNProviderOptions),
    ONNXEP_SLOT(OrtApi, GetCANNProviderOptionsAsString),
    ONNXEP_SLOT(OrtApi, ReleaseCANNProviderOptions),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetDeviceType),
    ONNXEP_SLOT(OrtApi, UpdateEnvWithCustomLogLevel),
    ONNXEP_SLOT(OrtApi, SetGlobalIntraOpThreadAffinity),
    ONNXEP_SLOT(OrtApi, RegisterCustomOpsLibrary_V2),
    ONNXEP_SLOT(OrtApi, RegisterCustomOpsUsingFunction),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetInputCount),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetOutputCount),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetInputName),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetOutputName),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetInputTypeInfo),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetOutputTypeInfo),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAttribute_tensor),
    ONNXEP_SLOT(OrtApi, HasSessionConfigEntry),
    ONNXEP_SLOT(OrtApi, GetSessionConfigEntry),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_Dnnl),
    ONNXEP_SLOT(OrtApi, CreateDnnlProviderOptions),
    ONNXEP_SLOT(OrtApi, UpdateDnnlProviderOptions),
    ONNXEP_SLOT(OrtApi, GetDnnlProviderOptionsAsString),
    ONNXEP_SLOT(OrtApi, ReleaseDnnlProviderOptions),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetNodeName),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetLogger),
    ONNXEP_SLOT(OrtApi, KernelContext_GetLogger),
    ONNXEP_SLOT(OrtApi, Logger_LogMessage),
    ONNXEP_SLOT(OrtApi, Logger_GetLoggingSeverityLevel),
    ONNXEP_SLOT(OrtApi, KernelInfoGetConstantInput_tensor),
    ONNXEP_SLOT(OrtApi, CastTypeInfoToOptionalTypeInfo),
    ONNXEP_SLOT(OrtApi, GetOptionalContainedTypeInfo),
    ONNXEP_SLOT(OrtApi, GetResizedStringTensorElementBuffer),
    ONNXEP_SLOT(OrtApi, KernelContext_GetAllocator),
    ONNXEP_SLOT(OrtApi, GetBuildInfoString),
    ONNXEP_SLOT(OrtApi, CreateROCMProviderOptions),
    ONNXEP_SLOT(OrtApi, UpdateROCMProviderOptions),
    ONNXEP_SLOT(OrtApi, GetROCMProviderOptionsAsString),
    ONNXEP_SLOT(OrtApi, ReleaseROCMProviderOptions),
    ONNXEP_SLOT(OrtApi, CreateAndRegisterAllocatorV2),
    ONNXEP_SLOT(OrtApi, RunAsync),
    ONNXEP_SLOT(OrtApi, UpdateTensorRTProviderOptionsWithValue),
    ONNXEP_SLOT(OrtApi, GetTensorRTProviderOptionsByName),
    ONNXEP_SLOT(OrtApi, UpdateCUDAProviderOptionsWithValue),
    ONNXEP_SLOT(OrtApi, GetCUDAProviderOptionsByName),
    ONNXEP_SLOT(OrtApi, KernelContext_GetResource),
    ONNXEP_SLOT(OrtApi, SetUserLoggingFunction),
    ONNXEP_SLOT(OrtApi, ShapeInferContext_GetInputCount),
    ONNXEP_SLOT(OrtApi, ShapeInferContext_GetInputTypeShape),
    ONNXEP_SLOT(OrtApi, ShapeInferContext_GetAttribute),
    ONNXEP_SLOT(OrtApi, ShapeInferContext_SetOutputTypeShape),
    ONNXEP_SLOT(OrtApi, SetSymbolicDimensions),
    ONNXEP_SLOT(OrtApi, ReadOpAttr),
    ONNXEP_SLOT(OrtApi, SetDeterministicCompute),
    ONNXEP_SLOT(OrtApi, KernelContext_ParallelFor),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_OpenVINO_V2),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_VitisAI),
    ONNXEP_SLOT(OrtApi, KernelContext_GetScratchBuffer),
    ONNXEP_SLOT(OrtApi, KernelInfoGetAllocator),
    ONNXEP_SLOT(OrtApi, AddExternalInitializersFromFilesInMemory),
    ONNXEP_SLOT(OrtApi, CreateLoraAdapter),
    ONNXEP_SLOT(OrtApi, CreateLoraAdapterFromArray),
    ONNXEP_SLOT(OrtApi, ReleaseLoraAdapter),
    ONNXEP_SLOT(OrtApi, RunOptionsAddActiveLoraAdapter),
    ONNXEP_SLOT(OrtApi, SetEpDynamicOptions),
    ONNXEP_SLOT(OrtApi, ReleaseValueInfo),
    ONNXEP_SLOT(OrtApi, ReleaseNode),
    ONNXEP_SLOT(OrtApi, ReleaseGraph),
    ONNXEP_SLOT(OrtApi, ReleaseModel),
    ONNXEP_SLOT(OrtApi, GetValueInfoName),
    ONNXEP_SLOT(OrtApi, GetValueInfoTypeInfo),
    ONNXEP_SLOT(OrtApi, GetModelEditorApi),
    ONNXEP_SLOT(OrtApi, CreateTensorWithDataAndDeleterAsOrtValue),
    ONNXEP_SLOT(OrtApi, SessionOptionsSetLoadCancellationFlag),
    ONNXEP_SLOT(OrtApi, GetCompileApi),
    ONNXEP_SLOT(OrtApi, CreateKeyValuePairs),
    ONNXEP_SLOT(OrtApi, AddKeyValuePair),
    ONNXEP_SLOT(OrtApi, GetKeyValue),
    ONNXEP_SLOT(OrtApi, GetKeyValuePairs),
    ONNXEP_SLOT(OrtApi, RemoveKeyValuePair),
    ONNXEP_SLOT(OrtApi, ReleaseKeyValuePairs),
    ONNXEP_SLOT(OrtApi, RegisterExecutionProviderLibrary),
    ONNXEP_SLOT(OrtApi, UnregisterExecutionProviderLibrary),
    ONNXEP_SLOT(OrtApi, GetEpDevices),
    ONNXEP_SLOT(OrtApi, SessionOptionsAppendExecutionProvider_V2),
    ONNXEP_SLOT(OrtApi, SessionOptionsSetEpSelectionPolicy),
    ONNXEP_SLOT(OrtApi, SessionOptionsSetEpSelectionPolicyDelegate),
    ONNXEP_SLOT(OrtApi, HardwareDevice_Type),
    ONNXEP_SLOT(OrtApi, HardwareDevice_VendorId),
    ONNXEP_SLOT(OrtApi, HardwareDevice_Vendor),
    ONNXEP_SLOT(OrtApi, HardwareDevice_DeviceId),
    ONNXEP_SLOT(OrtApi, HardwareDevice_Metadata),
    ONNXEP_SLOT(OrtApi, EpDevice_EpName),
    ONNXEP_SLOT(OrtApi, EpDevice_EpVendor),
    ONNXEP_SLOT(OrtApi, EpDevice_EpMetadata),
    ONNXEP_SLOT(OrtApi, EpDevice_EpOptions),
    ONNXEP_SLOT(OrtApi, EpDevice_Device),
    ONNXEP_SLOT(OrtApi, GetEpApi),
    ONNXEP_SLOT(OrtApi, GetTensorSizeInBytes),
    ONNXEP_SLOT(OrtApi, AllocatorGetStats),
    ONNXEP_SLOT(OrtApi, CreateMemoryInfo_V2),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetDeviceMemType),
    ONNXEP_SLOT(OrtApi, MemoryInfoGetVendorId),
    ONNXEP_SLOT(OrtApi, ValueInfo_GetValueProducer),
    ONNXEP_SLOT(OrtApi, ValueInfo_GetValueNumConsumers),
    ONNXEP_SLOT(OrtApi, ValueInfo_GetValueConsumers),
    ONNXEP_SLOT(OrtApi, ValueInfo_GetInitializerValue),
    ONNXEP_SLOT(OrtApi, ValueInfo_GetExternalInitializerInfo),
    ONNXEP_SLOT(OrtApi, ValueInfo_IsRequiredGraphInput),
    ONNXEP_SLOT(OrtApi, ValueInfo_IsOptionalGraphInput),
    ONNXEP_SLOT(OrtApi, ValueInfo_IsGraphOutput),
    ONNXEP_SLOT(OrtApi, ValueInfo_IsConstantInitializer),
    ONNXEP_SLOT(OrtApi, ValueInfo_IsFromOuterScope),
    ONNXEP_SLOT(OrtApi, Graph_GetName),
    ONNXEP_SLOT(OrtApi, Graph_GetModelPath),
    ONNXEP_SLOT(OrtApi, Graph_GetOnnxIRVersion),
    ONNXEP_SLOT(OrtApi, Graph_GetNumOperatorSets),
    ONNXEP_SLOT(OrtApi, Graph_GetOperatorSets),
    ONNXEP_SLOT(OrtApi, Graph_GetNumInputs),
    ONNXEP_SLOT(OrtApi, Graph_GetInputs),
    ONNXEP_SLOT(OrtApi, Graph_GetNumOutputs),
    ONNXEP_SLOT(OrtApi, Graph_GetOutputs),
    ONNXEP_SLOT(OrtApi, Graph_GetNumInitializers),
    ONNXEP_SLOT(OrtApi, Graph_GetInitializers),
    ONNXEP_SLOT(OrtApi, Graph_GetNumNodes),
    ONNXEP_SLOT(OrtApi, Graph_GetNodes),
    ONNXEP_SLOT(OrtApi, Graph_GetParentNode),
    ONNXEP_SLOT(OrtApi, Graph_GetGraphView),
    ONNXEP_SLOT(OrtApi, Node_GetId),
    ONNXEP_SLOT(OrtApi, Node_GetName),
    ONNXEP_SLOT(OrtApi, Node_GetOperatorType),
    ONNXEP_SLOT(OrtApi, Node_GetDomain),
    ONNXEP_SLOT(OrtApi, Node_GetSinceVersion),
    ONNXEP_SLOT(OrtApi, Node_GetNumInputs),
    ONNXEP_SLOT(OrtApi, Node_GetInputs),
    ONNXEP_SLOT(OrtApi, Node_GetNumOutputs),
    ONNXEP_SLOT(OrtApi, Node_GetOutputs),
    ONNXEP_SLOT(OrtApi, Node_GetNumImplicitInputs),
    ONNXEP_SLOT(OrtApi, Node_GetImplicitInputs),
    ONNXEP_SLOT(OrtApi, Node_GetNumAttributes),
    ONNXEP_SLOT(OrtApi, Node_GetAttributes),
    ONNXEP_SLOT(OrtApi, Node_GetAttributeByName),
    ONNXEP_SLOT(OrtApi, OpAttr_GetTensorAttributeAsOrtValue),
    ONNXEP_SLOT(OrtApi, OpAttr_GetType),
    ONNXEP_SLOT(OrtApi, OpAttr_GetName),
    ONNXEP_SLOT(OrtApi, Node_GetNumSubgraphs),
    ONNXEP_SLOT(OrtApi, Node_GetSubgraphs),
    ONNXEP_SLOT(OrtApi, Node_GetGraph),
    ONNXEP_SLOT(OrtApi, Node_GetEpName),
    ONNXEP_SLOT(OrtApi, ReleaseExternalInitializerInfo),
    ONNXEP_SLOT(OrtApi, ExternalInitializerInfo_GetFilePath),
    ONNXEP_SLOT(OrtApi, ExternalInitializerInfo_GetFileOffset),
    ONNXEP_SLOT(OrtApi, ExternalInitializerInfo_GetByteSize),
    ONNXEP_SLOT(OrtApi, GetRunConfigEntry),
    ONNXEP_SLOT(OrtApi, EpDevice_MemoryInfo),
    ONNXEP_SLOT(OrtApi, CreateSharedAllocator),
    ONNXEP_SLOT(OrtApi, GetSharedAllocator),
    ONNXEP_SLOT(OrtApi, ReleaseSharedAllocator),
    ONNXEP_SLOT(OrtApi, GetTensorData),
    ONNXEP_SLOT(OrtApi, GetSessionOptionsConfigEntries),
    ONNXEP_SLOT(OrtApi, SessionGetMemoryInfoForInputs),
    ONNXEP_SLOT(OrtApi, SessionGetMemoryInfoForOutputs),
    ONNXEP_SLOT(OrtApi, SessionGetEpDeviceForInputs),
    ONNXEP_SLOT(OrtApi, CreateSyncStreamForEpDevice),
    ONNXEP_SLOT(OrtApi, SyncStream_GetHandle),
    ONNXEP_SLOT(OrtApi, ReleaseSyncStream),
    ONNXEP_SLOT(OrtApi, CopyTensors),
    ONNXEP_SLOT(OrtApi, Graph_GetModelMetadata),
    ONNXEP_SLOT(OrtApi, GetModelCompatibilityForEpDevices),
    ONNXEP_SLOT(OrtApi, CreateExternalInitializerInfo),
    ONNXEP_SLOT(OrtApi, TensorTypeAndShape_HasShape),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetConfigEntries),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetOperatorDomain),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetOperatorType),
    ONNXEP_SLOT(OrtApi, KernelInfo_GetOperatorSinceVersion),
    ONNXEP_SLOT(OrtApi, GetInteropApi),
    ONNXEP_SLOT(OrtApi, SessionGetEpDeviceForOutputs),
    ONNXEP_SLOT(OrtApi, GetNumHardwareDevices),
    ONNXEP_SLOT(OrtApi, GetHardwareDevices),
    ONNXEP_SLOT(OrtApi, GetHardwareDeviceEpIncompatibilityDetails),
    ONNXEP_SLOT(OrtApi, DeviceEpIncompatibilityDetails_GetReasonsBitmask),
    ONNXEP_SLOT(OrtApi, DeviceEpIncompatibilityDetails_GetNotes),
    ONNXEP_SLOT(OrtApi, DeviceEpIncompatibilityDetails_GetErrorCode),
    ONNXEP_SLOT(OrtApi, ReleaseDeviceEpIncompatibilityDetails),
    ONNXEP_SLOT(OrtApi, CreateEnvWithOptions),
    ONNXEP_SLOT(OrtApi, Session_GetEpGraphAssignmentInfo),
    ONNXEP_SLOT(OrtApi, EpAssignedSubgraph_GetEpName),
    ONNXEP_SLOT(OrtApi, EpAssignedSubgraph_GetNodes),
    ONNXEP_SLOT(OrtApi, EpAssignedNode_GetName),
    ONNXEP_SLOT(OrtApi, EpAssignedNode_GetDomain),
    ONNXEP_SLOT(OrtApi, EpAssignedNode_GetOperatorType),
    ONNXEP_SLOT(OrtApi, RunOptionsSetSyncStream),
    ONNXEP_SLOT(OrtEpApi, CreateEpDevice),
    ONNXEP_SLOT(OrtEpApi, ReleaseEpDevice),
    ONNXEP_SLOT(OrtEpApi, EpGraphSupportInfo_AddNodesToFuse),
    ONNXEP_SLOT(OrtEpApi, EpGraphSupportInfo_AddSingleNode),
    ONNXEP_SLOT(OrtEpApi, NodeComputeContext_NodeName),
    ONNXEP_SLOT(OrtEpApi, EpDevice_AddAllocatorInfo),
    ONNXEP_SLOT(OrtEpApi, MemoryInfo_GetMemoryDevice),
    ONNXEP_SLOT(OrtEpApi, Value_GetMemoryDevice),
    ONNXEP_SLOT(OrtEpApi, MemoryDevice_AreEqual),
    ONNXEP_SLOT(OrtEpApi, MemoryDevice_GetDeviceType),
    ONNXEP_SLOT(OrtEpApi, MemoryDevice_GetMemoryType),
    ONNXEP_SLOT(OrtEpApi, MemoryDevice_GetVendorId),
    ONNXEP_SLOT(OrtEpApi, MemoryDevice_GetDeviceId),
    ONNXEP_SLOT(OrtEpApi, SyncStream_GetImpl),
    ONNXEP_SLOT(OrtEpApi, SyncStream_GetSyncId),
    ONNXEP_SLOT(OrtEpApi, GetSyncIdForLastWaitOnSyncStream),
    ONNXEP_SLOT(OrtEpApi, CreateHardwareDevice),
    ONNXEP_SLOT(OrtEpApi, ReleaseHardwareDevice),
    ONNXEP_SLOT(OrtEpApi, CreateKernelRegistry),
    ONNXEP_SLOT(OrtEpApi, ReleaseKernelRegistry),
    ONNXEP_SLOT(OrtEpApi, KernelRegistry_AddKernel),
    ONNXEP_SLOT(OrtEpApi, CreateKernelDefBuilder),
    ONNXEP_SLOT(OrtEpApi, ReleaseKernelDefBuilder),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_SetOperatorType),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_SetDomain),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_SetSinceVersion),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_SetExecutionProvider),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_SetInputMemType),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_SetOutputMemType),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_AddTypeConstraint),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_AddInputOutputAliases),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_AddInputOutputMutableAliases),
    ONNXEP_SLOT(OrtEpApi, KernelDefBuilder_Build),
    ONNXEP_SLOT(OrtEpApi, ReleaseKernelDef),
    ONNXEP_SLOT(OrtEpApi, KernelDef_GetOperatorType),
    ONNXEP_SLOT(OrtEpApi, KernelDef_GetDomain),
    ONNXEP_SLOT(OrtEpApi, KernelDef_GetSinceVersion),
    ONNXEP_SLOT(OrtEpApi, KernelDef_GetExecutionProvider),
    ONNXEP_SLOT(OrtEpApi, KernelDef_GetInputMemType),
    ONNXEP_SLOT(OrtEpApi, KernelDef_GetOutputMemType),
    ONNXEP_SLOT(OrtEpApi, GetTensorDataType),
    ONNXEP_SLOT(OrtEpApi, EpGraphSupportInfo_LookUpKernel),
    ONNXEP_SLOT(OrtEpApi, SharedPrePackedWeightCache_StoreWeightData),
    ONNXEP_SLOT(OrtEpApi, KernelInfo_GetEp),
    ONNXEP_SLOT(OrtEpApi, DeviceEpIncompatibilityDetails_SetDetails),
    ONNXEP_SLOT(OrtEpApi, CreateIfKernel),
    ONNXEP_SLOT(OrtEpApi, CreateLoopKernel),
    ONNXEP_SLOT(OrtEpApi, CreateScanKernel),
    ONNXEP_SLOT(OrtEpApi, ReleaseKernelImpl),
    ONNXEP_SLOT(OrtEpApi, GetEnvConfigEntries),
    ONNXEP_SLOT(OrtKernelImpl, Compute),
    ONNXEP_SLOT(OrtKernelImpl, Release),
    ONNXEP_SLOT(OrtKernelImpl, PrePackWeight),
    ONNXEP_SLOT(OrtKernelImpl, SetSharedPrePackedWeight),
    ONNXEP_SLOT(OrtEp, GetName),
    ONNXEP_SLOT(OrtEp, GetCapability),
    ONNXEP_SLOT(OrtEp, Compile),
    ONNXEP_SLOT(OrtEp, ReleaseNodeComputeInfos),
    ONNXEP_SLOT(OrtEp, GetPreferredDataLayout),
    ONNXEP_SLOT(OrtEp, ShouldConvertDataLayoutForOp),
    ONNXEP_SLOT(OrtEp, SetDynamicOptions),
    ONNXEP_SLOT(OrtEp, OnRunStart),
    ONNXEP_SLOT(OrtEp, OnRunEnd),
    ONNXEP_SLOT(OrtEp, CreateAllocator),
    ONNXEP_SLOT(OrtEp, CreateSyncStreamForDevice),
    ONNXEP_SLOT(OrtEp, GetCompiledModelCompatibilityInfo),
    ONNXEP_SLOT(OrtEp, GetKernelRegistry),
    ONNXEP_SLOT(OrtEp, IsConcurrentRunSupported),
    ONNXEP_SLOT(OrtEpFactory, GetName),
    ONNXEP_SLOT(OrtEpFactory, GetVendor),
    ONNXEP_SLOT(OrtEpFactory, GetSupportedDevices),
    ONNXEP_SLOT(OrtEpFactory, CreateEp),
    ONNXEP_SLOT(OrtEpFactory, ReleaseEp),
    ONNXEP_SLOT(OrtEpFactory, GetVendorId),
    ONNXEP_SLOT(OrtEpFactory, GetVersion),
    ONNXEP_SLOT(OrtEpFactory, ValidateCompiledModelCompatibilityInfo),
    ONNXEP_SLOT(OrtEpFactory, CreateAllocator),
    ONNXEP_SLOT(OrtEpFactory, ReleaseAllocator),
    ONNXEP_SLOT(OrtEpFactory, CreateDataTransfer),
    ONNXEP_SLOT(OrtEpFactory, IsStreamAware),
    ONNXEP_SLOT(OrtEpFactory, CreateSyncStreamForDevice),
    ONNXEP_SLOT(OrtEpFactory, GetHardwareDeviceIncompatibilityDetails),
    ONNXEP_SLOT(OrtEpFactory, CreateExternalResourceImporterForDevice),
    ONNXEP_SLOT(OrtEpFactory, GetNumCustomOpDomains),
    ONNXEP_SLOT(OrtEpFactory, GetCustomOpDomains),
};
#define ONNXEP_ABI_NSLOTS (sizeof(onnxep_abi_slots) / sizeof(onnxep_abi_slots[0]))

#endif

# onnxep inside onnxruntime: this kernel module (one per ISA) is itself an onnxruntime plugin-EP library (issue 28).
#
# onnxruntime dlopen()s the file (onnxep.ort.library_path(): the ISA variant onnxep chose), calls the exported
# CreateEpFactories / ReleaseEpFactory, and runs the nodes GetCapability claims through OrtKernelImpl adapters that
# call the nogil kernels above on raw pointers. Declarations: onnxep/_native/ort_plugin_abi.h (ABI version 24).
#
# Rules for everything below: every callback is `noexcept nogil` (onnxruntime calls them on its own threads without
# the GIL); every error goes back as an OrtStatus; no Python object and no module-level Python state (onnxruntime
# may load the library before Python imports it, so the module's initialisers may not have run): state lives in the
# factory / EP / kernel structs, allocated with malloc.

from libc.stdint cimport uint32_t
from libc.stdlib cimport malloc, calloc, realloc, free, atoi
from cpython.ref cimport Py_INCREF, Py_DECREF

cdef extern from *:              # (Python.h, which every Cython module includes)
    int Py_IsInitialized() noexcept nogil
from libc.string cimport strcmp, strcpy, strlen

cdef extern from "_native/ort_plugin_abi.h":
    ctypedef unsigned char ort_bool "bool"      # C99 bool (stdbool.h)
    ctypedef struct OrtStatus
    ctypedef struct OrtValue
    ctypedef struct OrtTypeInfo
    ctypedef struct OrtTensorTypeAndShapeInfo
    ctypedef struct OrtKernelInfo
    ctypedef struct OrtKernelContext
    ctypedef struct OrtLogger
    ctypedef struct OrtHardwareDevice
    ctypedef struct OrtEpDevice
    ctypedef struct OrtKeyValuePairs
    ctypedef struct OrtSessionOptions
    ctypedef struct OrtGraph
    ctypedef struct OrtNode
    ctypedef struct OrtValueInfo
    ctypedef struct OrtEpGraphSupportInfo
    ctypedef struct OrtMemoryInfo
    ctypedef struct OrtMemoryDevice
    ctypedef struct OrtAllocator
    ctypedef struct OrtDataTransferImpl
    ctypedef struct OrtSyncStreamImpl
    ctypedef struct OrtKernelRegistry
    ctypedef struct OrtKernelDefBuilder
    ctypedef struct OrtKernelDef
    ctypedef struct OrtDataType
    ctypedef struct OrtSharedPrePackedWeightCache
    ctypedef struct OrtDeviceEpIncompatibilityDetails
    ctypedef struct OrtExternalResourceImporterImpl
    ctypedef struct OrtCustomOpDomain
    ctypedef struct OrtOpAttr
    ctypedef struct OrtNodeComputeContext
    ctypedef enum OrtOpAttrType:
        ORT_OP_ATTR_UNDEFINED, ORT_OP_ATTR_INT, ORT_OP_ATTR_INTS, ORT_OP_ATTR_FLOAT, ORT_OP_ATTR_FLOATS
        ORT_OP_ATTR_STRING, ORT_OP_ATTR_STRINGS, ORT_OP_ATTR_GRAPH, ORT_OP_ATTR_TENSOR
    ctypedef struct OrtNodeFusionOptions:
        uint32_t ort_version_supported
        ort_bool drop_constant_initializers
    struct OrtNodeComputeInfo:
        uint32_t ort_version_supported
        OrtStatus* (*CreateState)(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* ctx, void** state) noexcept nogil
        OrtStatus* (*Compute)(OrtNodeComputeInfo* this_ptr, void* state, OrtKernelContext* kctx) noexcept nogil
        void (*ReleaseState)(OrtNodeComputeInfo* this_ptr, void* state) noexcept nogil

    ctypedef enum OrtErrorCode:
        ORT_OK
        ORT_FAIL
        ORT_INVALID_ARGUMENT
        ORT_NOT_IMPLEMENTED
        ORT_EP_FAIL
    ctypedef enum ONNXTensorElementDataType:
        ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
    ctypedef enum OrtHardwareDeviceType:
        OrtHardwareDeviceType_CPU
    ctypedef enum OrtCompiledModelCompatibility:
        OrtCompiledModelCompatibility_EP_NOT_APPLICABLE

    struct OrtKernelImpl
    struct OrtEp
    struct OrtEpFactory
    struct OrtEpApi
    struct OrtModelEditorApi
    ctypedef OrtStatus* (*OrtKernelCreateFunc)(void* state, const OrtKernelInfo* info,
                                               OrtKernelImpl** kernel_out) noexcept nogil

    struct OrtEpApi:
        OrtStatus* (*CreateEpDevice)(OrtEpFactory* ep_factory, const OrtHardwareDevice* hardware_device,
                                     const OrtKeyValuePairs* ep_metadata, const OrtKeyValuePairs* ep_options,
                                     OrtEpDevice** ep_device) noexcept nogil
        OrtStatus* (*EpGraphSupportInfo_AddSingleNode)(OrtEpGraphSupportInfo* info, const OrtNode* node) noexcept nogil
        OrtStatus* (*EpGraphSupportInfo_AddNodesToFuse)(OrtEpGraphSupportInfo* info, const OrtNode* const* nodes,
                                                        size_t n, const OrtNodeFusionOptions* opts) noexcept nogil
        OrtStatus* (*CreateKernelRegistry)(OrtKernelRegistry** kernel_registry) noexcept nogil
        void (*ReleaseKernelRegistry)(OrtKernelRegistry* kernel_registry) noexcept nogil
        OrtStatus* (*KernelRegistry_AddKernel)(OrtKernelRegistry* kernel_registry, const OrtKernelDef* kernel_def,
                                               OrtKernelCreateFunc kernel_create_func,
                                               void* kernel_create_func_state) noexcept nogil
        OrtStatus* (*CreateKernelDefBuilder)(OrtKernelDefBuilder** out) noexcept nogil
        void (*ReleaseKernelDefBuilder)(OrtKernelDefBuilder* b) noexcept nogil
        OrtStatus* (*KernelDefBuilder_SetOperatorType)(OrtKernelDefBuilder* b, const char* op_type) noexcept nogil
        OrtStatus* (*KernelDefBuilder_SetDomain)(OrtKernelDefBuilder* b, const char* domain) noexcept nogil
        OrtStatus* (*KernelDefBuilder_SetSinceVersion)(OrtKernelDefBuilder* b, int start, int end) noexcept nogil
        OrtStatus* (*KernelDefBuilder_SetExecutionProvider)(OrtKernelDefBuilder* b, const char* ep_name) noexcept nogil
        OrtStatus* (*KernelDefBuilder_AddTypeConstraint)(OrtKernelDefBuilder* b, const char* arg_name,
                                                         const OrtDataType* const* types,
                                                         size_t num_types) noexcept nogil
        OrtStatus* (*KernelDefBuilder_Build)(OrtKernelDefBuilder* b, OrtKernelDef** out) noexcept nogil
        void (*ReleaseKernelDef)(OrtKernelDef* kernel_def) noexcept nogil
        OrtStatus* (*GetTensorDataType)(ONNXTensorElementDataType elem_type, const OrtDataType** out) noexcept nogil
        OrtStatus* (*SharedPrePackedWeightCache_StoreWeightData)(OrtSharedPrePackedWeightCache* cache,
                                                                 void** ptrs, size_t* sizes, size_t n) noexcept nogil
        OrtStatus* (*KernelDefBuilder_AddInputOutputMutableAliases)(OrtKernelDefBuilder* b, const int* ins,
                                                                    const int* outs, size_t n) noexcept nogil
        OrtStatus* (*KernelInfo_GetEp)(const OrtKernelInfo* info, const OrtEp** ep) noexcept nogil
        OrtStatus* (*EpGraphSupportInfo_LookUpKernel)(OrtEpGraphSupportInfo* info, const OrtNode* node,
                                                      const OrtKernelDef** out_kernel_def) noexcept nogil

    struct OrtApi:
        OrtStatus* (*CreateStatus)(OrtErrorCode code, const char* msg) noexcept nogil
        const char* (*GetErrorMessage)(const OrtStatus* status) noexcept nogil
        void (*ReleaseStatus)(OrtStatus* status) noexcept nogil
        OrtStatus* (*GetTensorMutableData)(OrtValue* value, void** out) noexcept nogil
        OrtStatus* (*GetTensorData)(const OrtValue* value, const void** out) noexcept nogil
        OrtStatus* (*GetTensorTypeAndShape)(const OrtValue* value, OrtTensorTypeAndShapeInfo** out) noexcept nogil
        OrtStatus* (*GetTensorElementType)(const OrtTensorTypeAndShapeInfo* info,
                                           ONNXTensorElementDataType* out) noexcept nogil
        OrtStatus* (*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo* info, size_t* out) noexcept nogil
        OrtStatus* (*GetDimensions)(const OrtTensorTypeAndShapeInfo* info, int64_t* dim_values,
                                    size_t dim_values_length) noexcept nogil
        void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo* info) noexcept nogil
        OrtStatus* (*KernelInfoGetAttribute_float)(const OrtKernelInfo* info, const char* name,
                                                   float* out) noexcept nogil
        OrtStatus* (*KernelInfoGetAttribute_int64)(const OrtKernelInfo* info, const char* name,
                                                   int64_t* out) noexcept nogil
        OrtStatus* (*KernelContext_GetInputCount)(const OrtKernelContext* context, size_t* out) noexcept nogil
        OrtStatus* (*KernelContext_GetInput)(const OrtKernelContext* context, size_t index,
                                             const OrtValue** out) noexcept nogil
        OrtStatus* (*KernelContext_GetOutput)(OrtKernelContext* context, size_t index, const int64_t* dim_values,
                                              size_t dim_count, OrtValue** out) noexcept nogil
        OrtHardwareDeviceType (*HardwareDevice_Type)(const OrtHardwareDevice* device) noexcept nogil
        const OrtEpApi* (*GetEpApi)() noexcept nogil
        OrtStatus* (*Graph_GetNumNodes)(const OrtGraph* graph, size_t* num_nodes) noexcept nogil
        OrtStatus* (*Graph_GetNodes)(const OrtGraph* graph, const OrtNode** nodes, size_t num_nodes) noexcept nogil
        OrtStatus* (*Node_GetOperatorType)(const OrtNode* node, const char** operator_type) noexcept nogil
        OrtStatus* (*Node_GetNumInputs)(const OrtNode* node, size_t* num_inputs) noexcept nogil
        OrtStatus* (*AllocatorAlloc)(OrtAllocator* a, size_t size, void** out) noexcept nogil
        OrtStatus* (*AllocatorFree)(OrtAllocator* a, void* p) noexcept nogil
        OrtStatus* (*KernelInfoGetAttributeArray_int64)(const OrtKernelInfo* info, const char* name, int64_t* out,
                                                        size_t* size) noexcept nogil
        OrtStatus* (*KernelInfoGetAttribute_string)(const OrtKernelInfo* info, const char* name, char* out,
                                                    size_t* size) noexcept nogil
        OrtStatus* (*KernelInfo_GetInputName)(const OrtKernelInfo* info, size_t index, char* out,
                                              size_t* size) noexcept nogil
        OrtStatus* (*KernelInfo_GetOutputName)(const OrtKernelInfo* info, size_t index, char* out,
                                               size_t* size) noexcept nogil
        OrtStatus* (*GetValueInfoName)(const OrtValueInfo* v, const char** name) noexcept nogil
        OrtStatus* (*ValueInfo_GetValueProducer)(const OrtValueInfo* v, const OrtNode** producer,
                                                 size_t* output_index) noexcept nogil
        OrtStatus* (*ValueInfo_GetValueNumConsumers)(const OrtValueInfo* v, size_t* n) noexcept nogil
        OrtStatus* (*ValueInfo_GetValueConsumers)(const OrtValueInfo* v, const OrtNode** nodes, int64_t* input_indices,
                                                  size_t n) noexcept nogil
        OrtStatus* (*ValueInfo_GetInitializerValue)(const OrtValueInfo* v, const OrtValue** out) noexcept nogil
        OrtStatus* (*ValueInfo_IsGraphOutput)(const OrtValueInfo* v, ort_bool* out) noexcept nogil
        OrtStatus* (*ValueInfo_IsConstantInitializer)(const OrtValueInfo* v, ort_bool* out) noexcept nogil
        OrtStatus* (*Node_GetInputs)(const OrtNode* node, const OrtValueInfo** inputs, size_t n) noexcept nogil
        OrtStatus* (*Node_GetNumOutputs)(const OrtNode* node, size_t* n) noexcept nogil
        OrtStatus* (*Node_GetOutputs)(const OrtNode* node, const OrtValueInfo** outputs, size_t n) noexcept nogil
        OrtStatus* (*Graph_GetNumInputs)(const OrtGraph* g, size_t* n) noexcept nogil
        OrtStatus* (*Graph_GetInputs)(const OrtGraph* g, const OrtValueInfo** v, size_t n) noexcept nogil
        OrtStatus* (*Graph_GetNumOutputs)(const OrtGraph* g, size_t* n) noexcept nogil
        OrtStatus* (*Graph_GetOutputs)(const OrtGraph* g, const OrtValueInfo** v, size_t n) noexcept nogil
        OrtStatus* (*Node_GetName)(const OrtNode* node, const char** name) noexcept nogil
        OrtStatus* (*Node_GetDomain)(const OrtNode* node, const char** domain) noexcept nogil
        OrtStatus* (*Node_GetSinceVersion)(const OrtNode* node, int* since) noexcept nogil
        OrtStatus* (*Node_GetNumAttributes)(const OrtNode* node, size_t* n) noexcept nogil
        OrtStatus* (*Node_GetAttributes)(const OrtNode* node, const OrtOpAttr** attrs, size_t n) noexcept nogil
        OrtStatus* (*OpAttr_GetType)(const OrtOpAttr* a, OrtOpAttrType* t) noexcept nogil
        OrtStatus* (*OpAttr_GetName)(const OrtOpAttr* a, const char** name) noexcept nogil
        OrtStatus* (*ReadOpAttr)(const OrtOpAttr* a, OrtOpAttrType t, void* data, size_t len, size_t* out) noexcept nogil
        OrtStatus* (*GetValueInfoTypeInfo)(const OrtValueInfo* v, const OrtTypeInfo** ti) noexcept nogil
        OrtStatus* (*CastTypeInfoToTensorInfo)(const OrtTypeInfo* ti, const OrtTensorTypeAndShapeInfo** out) noexcept nogil
        OrtStatus* (*HasSessionConfigEntry)(const OrtSessionOptions* so, const char* key, int* out) noexcept nogil
        OrtStatus* (*GetSessionConfigEntry)(const OrtSessionOptions* so, const char* key, char* value,
                                            size_t* size) noexcept nogil
        OrtStatus* (*KernelContext_GetOutputCount)(const OrtKernelContext* context, size_t* out) noexcept nogil
        OrtStatus* (*KernelContext_ParallelFor)(const OrtKernelContext* context, void (*fn)(void*, size_t) noexcept nogil,
                                                size_t total, size_t num_batch, void* usr_data) noexcept nogil
        OrtStatus* (*CreateOpAttr)(const char* name, const void* data, int len, OrtOpAttrType type,
                                   OrtOpAttr** out) noexcept nogil
        void (*ReleaseOpAttr)(OrtOpAttr* attr) noexcept nogil
        const OrtModelEditorApi* (*GetModelEditorApi)() noexcept nogil
        OrtStatus* (*Graph_GetModelPath)(const OrtGraph* graph, const char** model_path) noexcept nogil
        OrtStatus* (*Node_GetAttributeByName)(const OrtNode* node, const char* name,
                                              const OrtOpAttr** attr) noexcept nogil

    struct OrtModelEditorApi:
        OrtStatus* (*CreateNode)(const char* operator_name, const char* domain_name, const char* node_name,
                                 const char* const* input_names, size_t input_names_len,
                                 const char* const* output_names, size_t output_names_len,
                                 OrtOpAttr** attributes, size_t attribs_len, OrtNode** node) noexcept nogil

    ctypedef struct OrtApiBase:
        const OrtApi* (*GetApi)(uint32_t version) noexcept nogil

    struct OrtKernelImpl:
        uint32_t ort_version_supported
        uint32_t flags
        OrtStatus* (*Compute)(OrtKernelImpl* this_ptr, OrtKernelContext* context) noexcept nogil
        void (*Release)(OrtKernelImpl* this_ptr) noexcept nogil
        OrtStatus* (*PrePackWeight)(OrtKernelImpl* this_ptr, const OrtValue* tensor, int input_index,
                                    OrtAllocator* allocator, OrtSharedPrePackedWeightCache* cache,
                                    ort_bool* is_packed) noexcept nogil
        OrtStatus* (*SetSharedPrePackedWeight)(OrtKernelImpl* this_ptr, const void* const* buffer_data_ptrs,
                                               const size_t* buffer_data_sizes, size_t num_buffers,
                                               int input_index) noexcept nogil

    struct OrtEp:
        uint32_t ort_version_supported
        const char* (*GetName)(const OrtEp* this_ptr) noexcept nogil
        OrtStatus* (*GetCapability)(OrtEp* this_ptr, const OrtGraph* graph,
                                    OrtEpGraphSupportInfo* graph_support_info) noexcept nogil
        OrtStatus* (*GetKernelRegistry)(OrtEp* this_ptr, const OrtKernelRegistry** kernel_registry) noexcept nogil
        OrtStatus* (*Compile)(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                              OrtNodeComputeInfo** infos, OrtNode** ep_context_nodes) noexcept nogil
        void (*ReleaseNodeComputeInfos)(OrtEp* this_ptr, OrtNodeComputeInfo** infos, size_t n) noexcept nogil

    struct OrtEpFactory:
        uint32_t ort_version_supported
        const char* (*GetName)(const OrtEpFactory* this_ptr) noexcept nogil
        const char* (*GetVendor)(const OrtEpFactory* this_ptr) noexcept nogil
        OrtStatus* (*GetSupportedDevices)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                          size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                          size_t* num_ep_devices) noexcept nogil
        OrtStatus* (*CreateEp)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                               const OrtKeyValuePairs* const* ep_metadata_pairs, size_t num_devices,
                               const OrtSessionOptions* session_options, const OrtLogger* logger,
                               OrtEp** ep) noexcept nogil
        void (*ReleaseEp)(OrtEpFactory* this_ptr, OrtEp* ep) noexcept nogil
        uint32_t (*GetVendorId)(const OrtEpFactory* this_ptr) noexcept nogil
        const char* (*GetVersion)(const OrtEpFactory* this_ptr) noexcept nogil
        OrtStatus* (*ValidateCompiledModelCompatibilityInfo)(OrtEpFactory* this_ptr,
                                                             const OrtHardwareDevice* const* devices,
                                                             size_t num_devices, const char* compatibility_info,
                                                             OrtCompiledModelCompatibility* out) noexcept nogil
        OrtStatus* (*CreateAllocator)(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                      const OrtKeyValuePairs* allocator_options,
                                      OrtAllocator** allocator) noexcept nogil
        void (*ReleaseAllocator)(OrtEpFactory* this_ptr, OrtAllocator* allocator) noexcept nogil
        OrtStatus* (*CreateDataTransfer)(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer) noexcept nogil
        ort_bool (*IsStreamAware)(const OrtEpFactory* this_ptr) noexcept nogil
        OrtStatus* (*CreateSyncStreamForDevice)(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                const OrtKeyValuePairs* stream_options,
                                                OrtSyncStreamImpl** stream) noexcept nogil
        OrtStatus* (*GetHardwareDeviceIncompatibilityDetails)(OrtEpFactory* this_ptr, const OrtHardwareDevice* hw,
                                                              OrtDeviceEpIncompatibilityDetails* details) noexcept nogil
        OrtStatus* (*CreateExternalResourceImporterForDevice)(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                                              OrtExternalResourceImporterImpl** out) noexcept nogil
        OrtStatus* (*GetNumCustomOpDomains)(OrtEpFactory* this_ptr, size_t* num_domains) noexcept nogil
        OrtStatus* (*GetCustomOpDomains)(OrtEpFactory* this_ptr, OrtCustomOpDomain** domains,
                                         size_t num_domains) noexcept nogil

    int ONNXEP_ORT_API_VERSION
    const char* ONNXEP_EP_NAME
    const char* ONNXEP_EP_VENDOR
    const char* ONNXEP_EP_VERSION

    enum:
        ONNXEP_PK_RELU, ONNXEP_PK_LEAKY_RELU, ONNXEP_PK_SIGMOID, ONNXEP_PK_TANH, ONNXEP_PK_EXP, ONNXEP_PK_SQRT
        ONNXEP_PK_NEG, ONNXEP_PK_ABS, ONNXEP_PK_HARD_SIGMOID, ONNXEP_PK_HARD_SWISH
        ONNXEP_PK_ADD, ONNXEP_PK_SUB, ONNXEP_PK_MUL, ONNXEP_PK_DIV, ONNXEP_PK_MAX, ONNXEP_PK_MIN
        ONNXEP_PK_SOFTMAX, ONNXEP_PK_LOG_SOFTMAX
        ONNXEP_PK_CONV, ONNXEP_PK_GEMM, ONNXEP_PK_MATMUL
        ONNXEP_PK_COUNT

    ctypedef struct onnxep_plugin_op:
        const char* op_type
        int since_start, since_end
        int kind
    const onnxep_plugin_op* onnxep_plugin_ops
    int ONNXEP_PLUGIN_NROWS

    ctypedef struct onnxep_factory
    ctypedef struct onnxep_kstate:
        onnxep_factory* factory
        int kind
        int since
    ctypedef struct onnxep_factory:
        OrtEpFactory base
        const OrtApi* api
        const OrtEpApi* ep_api
        OrtKernelRegistry* registry
        onnxep_kstate* kstates
    enum:
        ONNXEP_FUSE_NAME_MAX
    ctypedef struct onnxep_fused_act:
        char value[256]
        int act_kind
        float a, b
    ctypedef struct onnxep_ep:
        OrtEp base
        onnxep_factory* factory
        onnxep_fused_act* fused
        size_t nfused, cap_fused
        int fuse_acts
        int claim_conv
        int compile_mode
        int nthreads
        int precision_bf16
        int ctx_enable
        int ctx_embed
        char* ctx_path
    ctypedef struct onnxep_kernel:
        OrtKernelImpl base
        const OrtApi* api
        int kind
        float p0, p1
        int64_t axis
        int since
        int64_t group, auto_pad
        int64_t nks, kshape[3], nstrides, strides[3], ndil, dil[3], npads, pads[6]
        int act_kind
        float act_a, act_b
        int trans_a, trans_b
        float alpha, beta
        int passthrough
        const float* wp
        float* wp_owned
        int64_t wdims[5]
        size_t wndim

    ctypedef struct onnxep_abi_slot:
        const char* type
        const char* name
        long slot
    const onnxep_abi_slot* onnxep_abi_slots
    size_t ONNXEP_ABI_NSLOTS


cdef extern from "<stdlib.h>":
    int posix_memalign(void** memptr, size_t alignment, size_t size) noexcept nogil


cdef extern from "_native/ort_plugin_work.h":
    float* plugin_tl "onnxep_plugin_tl"(int slot, size_t n) noexcept nogil
    void shared_log_add "onnxep_shared_log_add"(const void* p) noexcept nogil
    int shared_log_count "onnxep_shared_log_count"() noexcept nogil
    const void* shared_log_get "onnxep_shared_log_get"(int i) noexcept nogil
    void shared_log_reset "onnxep_shared_log_reset"() noexcept nogil


def ort_shared_prepack_log(bint reset=False):
    """Addresses of the buffers onnxruntime handed to this library's kernels through SetSharedPrePackedWeight, in
    order (at most 256 kept); reset=True clears the log after reading it. For the tests (issue 28's must-show)."""
    cdef int i
    out = [<size_t>shared_log_get(i) for i in range(shared_log_count())]
    if reset:
        shared_log_reset()
    return out


def ort_abi_slots():
    """{(struct, member): slot} as compiled: offsetof(struct, member) / sizeof(void*) for every OrtApi / OrtEpApi
    slot and every OrtKernelImpl / OrtEp / OrtEpFactory member this library declares (tests/ort_plugin checks them
    against onnxruntime's static_assert anchors)."""
    cdef size_t i
    return {(onnxep_abi_slots[i].type.decode(), onnxep_abi_slots[i].name.decode()): onnxep_abi_slots[i].slot
            for i in range(ONNXEP_ABI_NSLOTS)}


cdef enum:
    _PLUGIN_MAX_DIMS = 16       # tensor rank the adapters take (BCAST_MAX_DIMS for the binary ops)


cdef inline OrtStatus* _pstatus(const OrtApi* api, OrtErrorCode code, const char* msg) noexcept nogil:
    return api.CreateStatus(code, msg)


# ---------------------------------------------------------------------------------------------------------------
# Tensor access helpers

cdef OrtStatus* _tensor_shape(const OrtApi* api, const OrtValue* v, int64_t* dims, size_t* ndim,
                              ONNXTensorElementDataType* dtype) noexcept nogil:
    """dims[:ndim] and element type of tensor v; an error status for rank > _PLUGIN_MAX_DIMS."""
    cdef OrtTensorTypeAndShapeInfo* info = NULL
    cdef OrtStatus* st = api.GetTensorTypeAndShape(v, &info)
    if st != NULL:
        return st
    st = api.GetDimensionsCount(info, ndim)
    if st == NULL and ndim[0] > _PLUGIN_MAX_DIMS:
        st = api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: tensor rank above 16 is not supported by the plugin")
    if st == NULL:
        st = api.GetDimensions(info, dims, ndim[0])
    if st == NULL and dtype != NULL:
        st = api.GetTensorElementType(info, dtype)
    api.ReleaseTensorTypeAndShapeInfo(info)
    return st


cdef inline Py_ssize_t _numel(const int64_t* dims, size_t ndim) noexcept nogil:
    cdef Py_ssize_t n = 1
    cdef size_t d
    for d in range(ndim):
        n *= <Py_ssize_t>dims[d]
    return n


# ---------------------------------------------------------------------------------------------------------------
# Threads: inside onnxruntime the adapters run their items on onnxruntime's intra-op pool
# (KernelContext_ParallelFor), sized by the session's intra_op_num_threads, instead of waking onnxep's own pool
# beside onnxruntime's spinning one. Items keep onnxep's task signature; tid is 0 (no adapter that goes through here
# uses it).

cdef struct _OrtPfor:
    task_fn fn
    void* ctx


cdef void _ort_item(void* p, size_t i) noexcept nogil:
    cdef _OrtPfor* j = <_OrtPfor*>p
    j.fn(j.ctx, <Py_ssize_t>i, 0)


cdef OrtStatus* _pfor(const OrtApi* api, OrtKernelContext* kctx, Py_ssize_t n, bint parallel, task_fn fn,
                      void* ctx) noexcept nogil:
    """fn(ctx, i, 0) for i in range(n): on onnxruntime's pool when `parallel` (onnxep's size threshold) and n >= 2."""
    cdef Py_ssize_t i
    cdef _OrtPfor job
    if not parallel or n < 2:
        for i in range(n):
            fn(ctx, i, 0)
        return NULL
    job.fn, job.ctx = fn, ctx
    # In at most 16 batches of consecutive items: one onnxruntime task per item (num_batch 0) cost more than the
    # work of small items (measured: a 512x7x7 3x3 conv's 4608 im2col rows took 7.1 ms instead of 3.0 at 1 thread).
    return api.KernelContext_ParallelFor(kctx, _ort_item, <size_t>n, <size_t>min(n, <Py_ssize_t>16), &job)


# ---------------------------------------------------------------------------------------------------------------
# Kernels: OrtKernelImpl adapters

cdef int _unary_code(int kind) noexcept nogil:
    if kind == ONNXEP_PK_RELU:
        return -1
    if kind == ONNXEP_PK_LEAKY_RELU:
        return UN_LEAKY_RELU
    if kind == ONNXEP_PK_SIGMOID:
        return UN_SIGMOID
    if kind == ONNXEP_PK_TANH:
        return UN_TANH
    if kind == ONNXEP_PK_EXP:
        return UN_EXP
    if kind == ONNXEP_PK_SQRT:
        return UN_SQRT
    if kind == ONNXEP_PK_NEG:
        return UN_NEG
    if kind == ONNXEP_PK_ABS:
        return UN_ABS
    if kind == ONNXEP_PK_HARD_SIGMOID:
        return UN_HARD_SIGMOID
    return UN_HARD_SWISH


cdef int _binary_code(int kind) noexcept nogil:
    if kind == ONNXEP_PK_ADD:
        return BIN_ADD
    if kind == ONNXEP_PK_SUB:
        return BIN_SUB
    if kind == ONNXEP_PK_MUL:
        return BIN_MUL
    if kind == ONNXEP_PK_DIV:
        return BIN_DIV
    if kind == ONNXEP_PK_MAX:
        return BIN_MAX
    return BIN_MIN


cdef OrtStatus* _compute_unary(onnxep_kernel* k, OrtKernelContext* ctx) noexcept nogil:
    cdef const OrtApi* api = k.api
    cdef const OrtValue* x = NULL
    cdef OrtValue* y = NULL
    cdef int64_t dims[_PLUGIN_MAX_DIMS]
    cdef size_t ndim = 0
    cdef ONNXTensorElementDataType dt
    cdef const void* xp = NULL
    cdef void* yp = NULL
    cdef Py_ssize_t n, nchunks
    cdef UnaryJob job
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &x)
    if st != NULL:
        return st
    if x == NULL:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: missing input 0")
    st = _tensor_shape(api, x, dims, &ndim, &dt)
    if st != NULL:
        return st
    if dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's elementwise kernels take float32 only")
    st = api.KernelContext_GetOutput(ctx, 0, dims, ndim, &y)
    if st != NULL:
        return st
    n = _numel(dims, ndim)
    if n == 0:
        return NULL
    st = api.GetTensorData(x, &xp)
    if st == NULL:
        st = api.GetTensorMutableData(y, &yp)
    if st != NULL:
        return st
    job.x, job.y, job.n, job.g = <const float*>xp, <float*>yp, n, NULL
    job.op, job.p0, job.p1 = _unary_code(k.kind), k.p0, k.p1
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    return _pfor(api, ctx, nchunks, nchunks >= 2, _unary_task, &job)


cdef OrtStatus* _compute_binary(onnxep_kernel* k, OrtKernelContext* ctx) noexcept nogil:
    """z := a op b with numpy broadcasting: output dims of size 1 dropped, neighbouring dims merged where both
    operands stay contiguous across them, then binary_f32_range over ELTWISE_CHUNK pieces (as add_f32 does)."""
    cdef const OrtApi* api = k.api
    cdef const OrtValue* a = NULL
    cdef const OrtValue* b = NULL
    cdef OrtValue* z = NULL
    cdef int64_t da[_PLUGIN_MAX_DIMS]
    cdef int64_t db[_PLUGIN_MAX_DIMS]
    cdef int64_t dz[_PLUGIN_MAX_DIMS]
    cdef Py_ssize_t sa_full[_PLUGIN_MAX_DIMS]
    cdef Py_ssize_t sb_full[_PLUGIN_MAX_DIMS]
    cdef Py_ssize_t shape[_PLUGIN_MAX_DIMS]
    cdef Py_ssize_t sa[_PLUGIN_MAX_DIMS]
    cdef Py_ssize_t sb[_PLUGIN_MAX_DIMS]
    cdef size_t na = 0, nb = 0
    cdef int nz, d, oa, ob
    cdef int64_t ea, eb
    cdef Py_ssize_t acc_a = 1, acc_b = 1, total, nchunks
    cdef int m = 0
    cdef ONNXTensorElementDataType ta, tb
    cdef const void* ap = NULL
    cdef const void* bp = NULL
    cdef void* zp = NULL
    cdef BinaryJob job
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &a)
    if st == NULL:
        st = api.KernelContext_GetInput(ctx, 1, &b)
    if st != NULL:
        return st
    if a == NULL or b == NULL:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: binary op needs two inputs")
    st = _tensor_shape(api, a, da, &na, &ta)
    if st == NULL:
        st = _tensor_shape(api, b, db, &nb, &tb)
    if st != NULL:
        return st
    if ta != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT or tb != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's elementwise kernels take float32 only")
    nz = <int>(na if na > nb else nb)
    oa = nz - <int>na
    ob = nz - <int>nb
    # right-aligned broadcast; element strides of contiguous a and b per output dim (0 where broadcast)
    for d in range(nz - 1, -1, -1):
        ea = da[d - oa] if d >= oa else 1
        eb = db[d - ob] if d >= ob else 1
        if ea == eb or eb == 1:
            dz[d] = ea
        elif ea == 1:
            dz[d] = eb
        else:
            return api.CreateStatus(ORT_INVALID_ARGUMENT,
                                    "onnxep: input shapes of the binary op do not broadcast")
        sa_full[d] = acc_a if ea != 1 else 0
        sb_full[d] = acc_b if eb != 1 else 0
        acc_a *= <Py_ssize_t>ea
        acc_b *= <Py_ssize_t>eb
    st = api.KernelContext_GetOutput(ctx, 0, dz, nz, &z)
    if st != NULL:
        return st
    total = _numel(dz, nz)
    if total == 0:
        return NULL
    st = api.GetTensorData(a, &ap)
    if st == NULL:
        st = api.GetTensorData(b, &bp)
    if st == NULL:
        st = api.GetTensorMutableData(z, &zp)
    if st != NULL:
        return st
    # collapse: drop size-1 output dims, merge dim d into the previous one when both operands are contiguous across
    for d in range(nz):
        if dz[d] == 1:
            continue
        if (m > 0 and sa[m - 1] == sa_full[d] * <Py_ssize_t>dz[d] and sb[m - 1] == sb_full[d] * <Py_ssize_t>dz[d]):
            shape[m - 1] *= <Py_ssize_t>dz[d]
            sa[m - 1] = sa_full[d]
            sb[m - 1] = sb_full[d]
        else:
            shape[m] = <Py_ssize_t>dz[d]
            sa[m] = sa_full[d]
            sb[m] = sb_full[d]
            m += 1
    if m == 0:      # a single element
        shape[0], sa[0], sb[0], m = 1, 0, 0, 1
    job.op, job.a, job.b, job.z, job.ndim, job.shape, job.sa, job.sb, job.total = (
        _binary_code(k.kind), <const float*>ap, <const float*>bp, <float*>zp, m, shape, sa, sb, total)
    nchunks = (total + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    return _pfor(api, ctx, nchunks, nchunks >= 2, _binary_task, &job)


cdef OrtStatus* _compute_softmax(onnxep_kernel* k, OrtKernelContext* ctx) noexcept nogil:
    """_softmax_f32 over (outer, K, inner): opset 13+ along `axis` alone; before 13 the input is flattened to 2-D at
    `axis` (K = every dim from axis on, inner = 1)."""
    cdef const OrtApi* api = k.api
    cdef const OrtValue* x = NULL
    cdef OrtValue* y = NULL
    cdef int64_t dims[_PLUGIN_MAX_DIMS]
    cdef size_t ndim = 0
    cdef ONNXTensorElementDataType dt
    cdef const void* xp = NULL
    cdef void* yp = NULL
    cdef int64_t axis
    cdef Py_ssize_t outer = 1, K = 1, inner = 1
    cdef size_t d
    cdef TfJob job
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &x)
    if st != NULL:
        return st
    if x == NULL:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: missing input 0")
    st = _tensor_shape(api, x, dims, &ndim, &dt)
    if st != NULL:
        return st
    if dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's Softmax takes float32 only")
    axis = k.axis + <int64_t>ndim if k.axis < 0 else k.axis
    if ndim == 0 or axis < 0 or axis >= <int64_t>ndim:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Softmax axis out of range for the input's rank")
    for d in range(ndim):
        if <int64_t>d < axis:
            outer *= <Py_ssize_t>dims[d]
        elif <int64_t>d == axis or k.since < 13:
            K *= <Py_ssize_t>dims[d]
        else:
            inner *= <Py_ssize_t>dims[d]
    st = api.KernelContext_GetOutput(ctx, 0, dims, ndim, &y)
    if st != NULL:
        return st
    if outer * K * inner == 0:
        return NULL
    st = api.GetTensorData(x, &xp)
    if st == NULL:
        st = api.GetTensorMutableData(y, &yp)
    if st != NULL:
        return st
    if inner == 1:              # contiguous rows: the vectorised-exp row kernel (as onnxep's own Softmax op)
        job.x, job.y, job.n, job.log, job.kind = <const float*>xp, <float*>yp, K, k.kind == ONNXEP_PK_LOG_SOFTMAX, 2
        return _pfor(api, ctx, outer, outer * K >= NORM_PAR_WORK, _tf_task, &job)
    if _softmax_f32(<const float*>xp, <float*>yp, outer, K, inner, k.kind == ONNXEP_PK_LOG_SOFTMAX, 0) != 0:
        return api.CreateStatus(ORT_FAIL, "onnxep: Softmax could not allocate its scratch")
    return NULL


# ---------------------------------------------------------------------------------------------------------------
# Conv / Gemm / MatMul: onnxep's packed-B SGEMM (_sgemm_tile) and NCHW conv pieces (im2col rows, depthwise planes),
# with the items run on onnxruntime's pool. The weight (Conv's W, Gemm's / MatMul's constant B) is packed once in
# PrePackWeight, into onnxruntime's shared pre-packed weight cache when it passes one (two nodes with the same
# initializer then share one buffer), else into a buffer this kernel owns. A fused activation (a Relu that only
# reads this node's output, see GetCapability) runs in the GEMM epilogue.

cdef struct _PGemm:
    # one GEMM split into (row block, column slab) tiles, each run by whichever onnxruntime thread takes it
    Py_ssize_t M, N, K, rsa, csa, rsc, csc, ntiles, mcb, slab, npanels
    float alpha, beta
    const float* a
    const float* bp
    float* c
    const float* bias_col
    const Act* act
    int oom


cdef void _pgemm_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef _PGemm* j = <_PGemm*>p
    cdef float* work = plugin_tl(1, SGEMM_WORK_PER_THREAD)
    cdef Py_ssize_t ic = (t // j.ntiles) * j.mcb, jp0 = (t % j.ntiles) * j.slab
    if work == NULL:
        j.oom = 1
        return
    _sgemm_tile(ic, min(j.mcb, j.M - ic), jp0, min(jp0 + j.slab, j.npanels), j.N, j.K, j.alpha, j.a, j.rsa, j.csa,
                NULL, j.bp, j.beta, j.c, j.rsc, j.csc, j.bias_col, NULL, NULL, j.act, work, True)


cdef OrtStatus* _pgemm(const OrtApi* api, OrtKernelContext* ctx, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                       float alpha, const float* a, Py_ssize_t rsa, Py_ssize_t csa, const float* bp, float beta,
                       float* c, Py_ssize_t rsc, Py_ssize_t csc, const float* bias_col, const Act* act) noexcept nogil:
    """C := act(alpha*A@B + beta*C [+ bias_col]), B packed (sgemm_pack_b_raw): one thread below onnxep's flop
    threshold (PLUGIN_MT_FLOPS), else tiles of equal row blocks (<= MC rows) x column slabs, at least 8 when the
    columns allow it (balance over onnxruntime's threads, whose count an adapter does not see)."""
    cdef _PGemm j
    cdef Py_ssize_t mtiles, cap, want
    cdef float* work
    cdef OrtStatus* st
    if M <= 0 or N <= 0:
        return NULL
    if K <= 0 or <double>2.0 * M * N * K < PLUGIN_MT_FLOPS:
        work = plugin_tl(1, SGEMM_WORK_PER_THREAD)
        if work == NULL:
            return api.CreateStatus(ORT_FAIL, "onnxep: out of memory for the GEMM workspace")
        sgemm_packed_raw(M, N, K, alpha, a, rsa, csa, bp, beta, c, rsc, csc, bias_col, NULL, act, work, 1)
        return NULL
    j.M, j.N, j.K, j.alpha, j.beta, j.a, j.rsa, j.csa, j.bp = M, N, K, alpha, beta, a, rsa, csa, bp
    j.c, j.rsc, j.csc, j.bias_col, j.act, j.oom = c, rsc, csc, bias_col, act, 0
    j.npanels = (N + SGEMM_NR - 1) // SGEMM_NR
    mtiles = (M + SGEMM_MC - 1) // SGEMM_MC
    j.mcb = _round_up((M + mtiles - 1) // mtiles, SGEMM_MR)
    mtiles = (M + j.mcb - 1) // j.mcb
    cap = <Py_ssize_t>(SGEMM_NC_MAX // SGEMM_NR)
    if csc != 1 and beta == 0.0:
        cap = min(cap, <Py_ssize_t>(SGEMM_CT_COLS // SGEMM_NR))
    j.slab = min(j.npanels, cap)
    if mtiles * ((j.npanels + j.slab - 1) // j.slab) < 8:
        want = (8 + mtiles - 1) // mtiles
        j.slab = max(<Py_ssize_t>1, min(cap, (j.npanels + want - 1) // want))
    j.ntiles = (j.npanels + j.slab - 1) // j.slab
    st = _pfor(api, ctx, mtiles * j.ntiles, True, _pgemm_task, &j)
    if st == NULL and j.oom:
        st = api.CreateStatus(ORT_FAIL, "onnxep: out of memory for the GEMM workspace")
    return st


cdef void _act_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    """The epilogue activation over chunk t of a depthwise conv's output (_PGemm reused: c, M = length, act)."""
    cdef _PGemm* j = <_PGemm*>p
    cdef Py_ssize_t i, lo = t * 16384, hi = min(lo + 16384, j.M)
    for i in range(lo, hi):
        j.c[i] = act1(j.act, j.c[i])


cdef OrtStatus* _weight_input(onnxep_kernel* k, OrtKernelContext* ctx, int64_t* wdims, size_t* wndim,
                              const float** w) noexcept nogil:
    """The weight input (index 1) as onnxruntime passes it, for a kernel whose weight was not pre-packed."""
    cdef const OrtApi* api = k.api
    cdef const OrtValue* v = NULL
    cdef const void* p = NULL
    cdef ONNXTensorElementDataType dt
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 1, &v)
    if st == NULL and v == NULL:
        st = api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: missing weight input")
    if st == NULL:
        st = _tensor_shape(api, v, wdims, wndim, &dt)
    if st == NULL and dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
        st = api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's Conv / Gemm take float32 only")
    if st == NULL:
        st = api.GetTensorData(v, &p)
    w[0] = <const float*>p
    return st


cdef inline bint _conv_is_dw(const onnxep_kernel* k, const int64_t* wdims) noexcept nogil:
    return wdims[1] == 1 and k.group > 1


cdef OrtStatus* _compute_conv(onnxep_kernel* k, OrtKernelContext* ctx) noexcept nogil:
    cdef const OrtApi* api = k.api
    cdef const OrtValue* x = NULL
    cdef const OrtValue* bv = NULL
    cdef OrtValue* y = NULL
    cdef int64_t xd[_PLUGIN_MAX_DIMS]
    cdef int64_t wd[_PLUGIN_MAX_DIMS]
    cdef int64_t bd[_PLUGIN_MAX_DIMS]
    cdef int64_t yd[5]
    cdef size_t xn = 0, wn = 0, bn = 0, nin = 0, d
    cdef ONNXTensorElementDataType dt
    cdef const void* xp = NULL
    cdef const void* bp = NULL
    cdef void* yp = NULL
    cdef const float* w = NULL
    cdef const float* wpk
    cdef float* col = NULL
    cdef float* packed = NULL
    cdef ConvGeom g
    cdef Act act
    cdef Py_ssize_t ins[3]
    cdef Py_ssize_t ks[3]
    cdef Py_ssize_t ss[3]
    cdef Py_ssize_t dl[3]
    cdef Py_ssize_t pb[3]
    cdef Py_ssize_t outs[3]
    cdef Py_ssize_t N, nsp, i, Cg, Coutg, Kc, P, blen, n, gi, ext, total, o, DHW
    cdef ConvNchwJob job
    cdef Dw3Job dj
    cdef _PGemm aj
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &x)
    if st != NULL:
        return st
    st = _tensor_shape(api, x, xd, &xn, &dt)
    if st != NULL:
        return st
    if dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT or xn < 3 or xn > 5:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's Conv takes float32 inputs of rank 3 to 5")
    if k.wp != NULL:
        wn = k.wndim
        for d in range(wn):
            wd[d] = k.wdims[d]
    else:
        st = _weight_input(k, ctx, wd, &wn, &w)
        if st != NULL:
            return st
    if wn != xn:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv weight rank differs from the input's")
    N = xd[0]
    nsp = <Py_ssize_t>xn - 2
    g.cout, g.group, g.C = wd[0], k.group, xd[1]
    if g.group < 1 or g.C != wd[1] * g.group or g.cout % g.group != 0 or g.cout < 1:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv channels do not match the weight and group")
    if (k.nks and k.nks != nsp) or (k.nstrides and k.nstrides != nsp) or (k.ndil and k.ndil != nsp) \
            or (k.npads and k.npads != 2 * nsp):
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv attribute lengths do not match the input's rank")
    for i in range(3):                  # leading spatial dims of 1 for 1-D and 2-D convs
        ins[i], ks[i], ss[i], dl[i], pb[i], outs[i] = 1, 1, 1, 1, 0, 1
    for i in range(nsp):
        o = 3 - nsp + i
        ins[o] = xd[2 + i]
        ks[o] = wd[2 + i]
        if k.nks and k.kshape[i] != wd[2 + i]:
            return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv kernel_shape differs from the weight's")
        ss[o] = k.strides[i] if k.nstrides else 1
        dl[o] = k.dil[i] if k.ndil else 1
        if ss[o] < 1 or dl[o] < 1:
            return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv strides and dilations must be >= 1")
        ext = (ks[o] - 1) * dl[o] + 1
        if k.auto_pad == 0:
            pb[o] = k.pads[i] if k.npads else 0
            if k.npads and (k.pads[i] < 0 or k.pads[nsp + i] < 0):
                return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv pads must be >= 0")
            outs[o] = (ins[o] + pb[o] + (k.pads[nsp + i] if k.npads else 0) - ext) // ss[o] + 1 \
                if ins[o] + pb[o] + (k.pads[nsp + i] if k.npads else 0) >= ext else 0
        elif k.auto_pad == 1:
            outs[o] = (ins[o] - ext) // ss[o] + 1 if ins[o] >= ext else 0
        else:
            outs[o] = (ins[o] + ss[o] - 1) // ss[o]
            total = max(<Py_ssize_t>0, (outs[o] - 1) * ss[o] + ext - ins[o])
            pb[o] = total // 2 if k.auto_pad == 2 else total - total // 2
    g.D, g.H, g.W = ins[0], ins[1], ins[2]
    g.kd, g.kh, g.kw = ks[0], ks[1], ks[2]
    g.sd, g.sh, g.sw = ss[0], ss[1], ss[2]
    g.dd, g.dh, g.dw = dl[0], dl[1], dl[2]
    g.pd, g.ph, g.pw = pb[0], pb[1], pb[2]
    g.Do, g.Ho, g.Wo = outs[0], outs[1], outs[2]
    yd[0], yd[1] = N, g.cout
    for i in range(nsp):
        yd[2 + i] = outs[3 - nsp + i]
    st = api.KernelContext_GetInputCount(ctx, &nin)
    if st == NULL and nin > 2:
        st = api.KernelContext_GetInput(ctx, 2, &bv)
    if st == NULL and bv != NULL:
        st = _tensor_shape(api, bv, bd, &bn, &dt)
        if st == NULL and (bn != 1 or bd[0] != g.cout or dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT):
            st = api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv bias must be float32 of shape (M,)")
        if st == NULL:
            st = api.GetTensorData(bv, &bp)
    if st == NULL:
        st = api.KernelContext_GetOutput(ctx, 0, yd, xn, &y)
    if st != NULL:
        return st
    P = g.Do * g.Ho * g.Wo
    if N * g.cout * P == 0:
        return NULL
    st = api.GetTensorData(x, &xp)
    if st == NULL:
        st = api.GetTensorMutableData(y, &yp)
    if st != NULL:
        return st
    act.kind, act.a, act.b = k.act_kind, k.act_a, k.act_b
    Cg = g.C // g.group
    Coutg = g.cout // g.group
    Kc = Cg * g.kd * g.kh * g.kw
    DHW = g.D * g.H * g.W
    if _conv_is_dw(k, wd):                  # one input channel per group: direct planes (weight not packed)
        if w == NULL:
            return api.CreateStatus(ORT_FAIL, "onnxep: depthwise Conv weight missing")
        if _dw3_ok(&g):
            dj.x, dj.w, dj.bias, dj.y, dj.relu, dj.g = <const float*>xp, w, <const float*>bp, <float*>yp, \
                act.kind == ACT_RELU, &g
            st = _pfor(api, ctx, N * g.cout, <double>8.0 * N * g.cout * P * 9 >= PLUGIN_MT_FLOPS, _dw3_task, &dj)
        else:
            job.x, job.w, job.bias, job.y, job.relu, job.g = <const float*>xp, w, <const float*>bp, <float*>yp, \
                act.kind == ACT_RELU, &g
            st = _pfor(api, ctx, N * g.cout, <double>8.0 * N * g.cout * P * g.kd * g.kh * g.kw >= PLUGIN_MT_FLOPS,
                       _dw_plane_task, &job)
        if st == NULL and act.kind != ACT_NONE and act.kind != ACT_RELU:
            aj.c, aj.M, aj.act = <float*>yp, N * g.cout * P, &act
            st = _pfor(api, ctx, (aj.M + 16383) // 16384, aj.M >= 65536, _act_task, &aj)
        return st
    blen = sgemm_pack_b_len(Kc, Coutg)
    wpk = k.wp
    if wpk == NULL:                         # weight not pre-packed (not an initializer): pack it for this call
        packed = <float*>malloc(<size_t>(g.group * blen) * sizeof(float) + 64)
        if packed == NULL:
            return api.CreateStatus(ORT_FAIL, "onnxep: out of memory packing a Conv weight")
        for gi in range(g.group):
            sgemm_pack_b_raw(Kc, Coutg, w + gi * Coutg * Kc, 1, Kc, packed + gi * blen)
        wpk = packed
    if not _conv_is_pointwise(&g):
        col = plugin_tl(0, <size_t>(Kc * P))
        if col == NULL:
            free(packed)
            return api.CreateStatus(ORT_FAIL, "onnxep: out of memory for the im2col workspace")
    job.g, job.col, job.P = &g, col, P
    for n in range(N):
        for gi in range(g.group):
            job.x = <const float*>xp + (n * g.C + gi * Cg) * DHW
            if col != NULL:
                st = _pfor(api, ctx, Kc, <double>Kc * P >= 32768, _im2col_task, &job)
                if st != NULL:
                    break
            st = _pgemm(api, ctx, P, Coutg, Kc, 1.0, <const float*>col if col != NULL else job.x, 1, P,
                        wpk + gi * blen, 0.0,
                        <float*>yp + (n * g.cout + gi * Coutg) * P, 1, P,
                        (<const float*>bp + gi * Coutg) if bp != NULL else NULL, &act)
            if st != NULL:
                break
        if st != NULL:
            break
    free(packed)
    return st


cdef OrtStatus* _compute_gemm(onnxep_kernel* k, OrtKernelContext* ctx) noexcept nogil:
    """Gemm (Y = alpha*A'B' + beta*C, C unidirectionally broadcast) and MatMul with a 2-D B (A of any rank >= 1)."""
    cdef const OrtApi* api = k.api
    cdef const OrtValue* av = NULL
    cdef const OrtValue* cv = NULL
    cdef OrtValue* y = NULL
    cdef int64_t ad[_PLUGIN_MAX_DIMS]
    cdef int64_t bd[_PLUGIN_MAX_DIMS]
    cdef int64_t cd[_PLUGIN_MAX_DIMS]
    cdef int64_t yd[_PLUGIN_MAX_DIMS]
    cdef size_t an = 0, bn = 0, cn = 0, nin = 0, d, yn
    cdef ONNXTensorElementDataType dt
    cdef const void* ap = NULL
    cdef const void* cp = NULL
    cdef void* yp = NULL
    cdef const float* b = NULL
    cdef const float* bpk
    cdef const float* bias = NULL
    cdef float* packed = NULL
    cdef float* yf
    cdef const float* cf
    cdef Py_ssize_t M, K, N, i, jx, cm, cnn, rsa, csa
    cdef float beta = 0.0
    cdef Act act
    cdef bint gemm = k.kind == ONNXEP_PK_GEMM
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &av)
    if st == NULL:
        st = _tensor_shape(api, av, ad, &an, &dt)
    if st != NULL:
        return st
    if dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT or an < 1 or (gemm and an != 2):
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's Gemm / MatMul take float32 A "
                                                      "(rank 2 for Gemm)")
    if k.wp != NULL:
        bn = k.wndim
        for d in range(bn):
            bd[d] = k.wdims[d]
    else:
        st = _weight_input(k, ctx, bd, &bn, &b)
        if st != NULL:
            return st
    if bn != 2:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: the plugin's Gemm / MatMul take a 2-D B")
    if gemm:
        if k.trans_a:
            M, K, rsa, csa = ad[1], ad[0], 1, ad[1]
        else:
            M, K, rsa, csa = ad[0], ad[1], ad[1], 1
    else:
        K = ad[an - 1]
        M = 1
        for d in range(an - 1):
            M *= <Py_ssize_t>ad[d]
        rsa, csa = K, 1
    N = bd[0] if (gemm and k.trans_b) else bd[1]
    if (bd[1] if (gemm and k.trans_b) else bd[0]) != K:
        return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Gemm / MatMul inner dimensions differ")
    if gemm:
        yd[0], yd[1] = M, N
        yn = 2
    else:
        for d in range(an - 1):
            yd[d] = ad[d]
        yd[an - 1] = N
        yn = an if an >= 2 else 1
        if an == 1:
            yd[0] = N
    act.kind, act.a, act.b = k.act_kind, k.act_a, k.act_b
    if gemm:
        st = api.KernelContext_GetInputCount(ctx, &nin)
        if st == NULL and nin > 2:
            st = api.KernelContext_GetInput(ctx, 2, &cv)
        if st == NULL and cv != NULL and k.beta != 0.0:
            st = _tensor_shape(api, cv, cd, &cn, &dt)
            if st == NULL and (dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT or cn > 2):
                st = api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Gemm C must be float32 of rank <= 2")
            if st == NULL:
                st = api.GetTensorData(cv, &cp)
        if st != NULL:
            return st
    st = api.KernelContext_GetOutput(ctx, 0, yd, yn, &y)
    if st == NULL:
        st = api.GetTensorMutableData(y, &yp)
    if st == NULL:
        st = api.GetTensorData(av, &ap)
    if st != NULL or M * N == 0:
        return st
    yf = <float*>yp
    if cp != NULL:
        cm, cnn = 1, 1
        if cn == 1:
            cnn = cd[0]
        elif cn == 2:
            cm, cnn = cd[0], cd[1]
        if (cm != 1 and cm != M) or (cnn != 1 and cnn != N):
            return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Gemm C does not broadcast to (M, N)")
        cf = <const float*>cp
        if cm == 1 and cnn == N and k.beta == 1.0:
            bias = cf                       # a row vector: the epilogue's column bias
        else:
            for i in range(M):
                for jx in range(N):
                    yf[i * N + jx] = cf[(i if cm > 1 else 0) * cnn + (jx if cnn > 1 else 0)]
            beta = k.beta
    bpk = k.wp
    if bpk == NULL and K > 0:
        packed = <float*>malloc(<size_t>sgemm_pack_b_len(K, N) * sizeof(float) + 64)
        if packed == NULL:
            return api.CreateStatus(ORT_FAIL, "onnxep: out of memory packing B")
        if gemm and k.trans_b:
            sgemm_pack_b_raw(K, N, b, 1, K, packed)
        else:
            sgemm_pack_b_raw(K, N, b, N, 1, packed)
        bpk = packed
    st = _pgemm(api, ctx, M, N, K, k.alpha if gemm else 1.0, <const float*>ap, rsa, csa, bpk, beta, yf, N, 1, bias,
                &act)
    free(packed)
    return st


cdef OrtStatus* _compute_passthrough(onnxep_kernel* k, OrtKernelContext* ctx) noexcept nogil:
    """An activation already applied in its producer's epilogue: the input as is (no copy when onnxruntime gave the
    output the input's buffer, which the kernel's in-place alias lets it do)."""
    cdef const OrtApi* api = k.api
    cdef const OrtValue* x = NULL
    cdef OrtValue* y = NULL
    cdef int64_t dims[_PLUGIN_MAX_DIMS]
    cdef size_t ndim = 0
    cdef const void* xp = NULL
    cdef void* yp = NULL
    cdef OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &x)
    if st == NULL:
        st = _tensor_shape(api, x, dims, &ndim, NULL)
    if st == NULL:
        st = api.KernelContext_GetOutput(ctx, 0, dims, ndim, &y)
    if st == NULL:
        st = api.GetTensorData(x, &xp)
    if st == NULL:
        st = api.GetTensorMutableData(y, &yp)
    if st == NULL and xp != yp and _numel(dims, ndim) > 0:
        memcpy(yp, xp, <size_t>_numel(dims, ndim) * sizeof(float))
    return st


cdef OrtStatus* _kernel_compute(OrtKernelImpl* this_ptr, OrtKernelContext* ctx) noexcept nogil:
    cdef onnxep_kernel* k = <onnxep_kernel*>this_ptr
    if k.passthrough:
        return _compute_passthrough(k, ctx)
    if k.kind == ONNXEP_PK_CONV:
        return _compute_conv(k, ctx)
    if k.kind == ONNXEP_PK_GEMM or k.kind == ONNXEP_PK_MATMUL:
        return _compute_gemm(k, ctx)
    if k.kind == ONNXEP_PK_SOFTMAX or k.kind == ONNXEP_PK_LOG_SOFTMAX:
        return _compute_softmax(k, ctx)
    if k.kind >= ONNXEP_PK_ADD:
        return _compute_binary(k, ctx)
    return _compute_unary(k, ctx)


cdef void _kernel_release(OrtKernelImpl* this_ptr) noexcept nogil:
    free((<onnxep_kernel*>this_ptr).wp_owned)
    free(this_ptr)


cdef OrtStatus* _kernel_prepack(OrtKernelImpl* this_ptr, const OrtValue* tensor, int input_index,
                                OrtAllocator* allocator, OrtSharedPrePackedWeightCache* cache,
                                ort_bool* is_packed) noexcept nogil:
    """Conv's W (not depthwise) and Gemm's / MatMul's 2-D B, packed as onnxep's SGEMM B operand (per group for Conv).
    With a shared cache (onnxruntime passes one for CPU allocators) the buffer comes from `allocator` and is handed
    to the cache (SharedPrePackedWeightCache_StoreWeightData; onnxruntime then owns it and gives every kernel with
    the same initializer the same buffer through SetSharedPrePackedWeight); without one this kernel owns it."""
    cdef onnxep_kernel* k = <onnxep_kernel*>this_ptr
    cdef const OrtApi* api = k.api
    cdef const OrtEpApi* ep_api
    cdef int64_t dims[_PLUGIN_MAX_DIMS]
    cdef size_t ndim = 0, d, nbytes
    cdef ONNXTensorElementDataType dt
    cdef const void* src = NULL
    cdef void* buf = NULL
    cdef float* out
    cdef const float* w
    cdef Py_ssize_t K, N = 0, blen = 0, gi, Coutg = 0
    cdef OrtStatus* st
    cdef OrtStatus* free_st
    is_packed[0] = 0
    if input_index != 1 or k.kind < ONNXEP_PK_CONV:
        return NULL
    st = _tensor_shape(api, tensor, dims, &ndim, &dt)
    if st != NULL or dt != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
        return st
    if k.kind == ONNXEP_PK_CONV:
        if ndim < 3 or ndim > 5 or k.group < 1 or dims[0] % k.group != 0 or _conv_is_dw(k, dims):
            return NULL                 # depthwise reads W as it is; bad shapes fail in Compute
        Coutg = dims[0] // k.group
        K = 1
        for d in range(1, ndim):
            K *= <Py_ssize_t>dims[d]
        blen = sgemm_pack_b_len(K, Coutg)
        nbytes = <size_t>(k.group * blen) * sizeof(float)
    else:
        if ndim != 2:
            return NULL
        if k.kind == ONNXEP_PK_GEMM and k.trans_b:
            K, N = dims[1], dims[0]
        else:
            K, N = dims[0], dims[1]
        nbytes = <size_t>sgemm_pack_b_len(K, N) * sizeof(float)
    if nbytes == 0 or K <= 0:
        return NULL
    st = api.GetTensorData(tensor, &src)
    if st != NULL:
        return st
    if cache != NULL:
        st = api.AllocatorAlloc(allocator, nbytes, &buf)
        if st != NULL:
            return st
    elif posix_memalign(&buf, 64, nbytes) != 0:
        return api.CreateStatus(ORT_FAIL, "onnxep: out of memory pre-packing a weight")
    out = <float*>buf
    w = <const float*>src
    if k.kind == ONNXEP_PK_CONV:
        for gi in range(k.group):
            sgemm_pack_b_raw(K, Coutg, w + gi * Coutg * K, 1, K, out + gi * blen)
    elif k.kind == ONNXEP_PK_GEMM and k.trans_b:
        sgemm_pack_b_raw(K, N, w, 1, K, out)
    else:
        sgemm_pack_b_raw(K, N, w, N, 1, out)
    if cache != NULL:
        ep_api = api.GetEpApi()
        st = ep_api.SharedPrePackedWeightCache_StoreWeightData(cache, &buf, &nbytes, 1)
        if st != NULL:
            free_st = api.AllocatorFree(allocator, buf)
            if free_st != NULL:
                api.ReleaseStatus(free_st)
            return st
        k.wp = out                      # onnxruntime owns it now; SetSharedPrePackedWeight may swap in a twin's
    else:
        free(k.wp_owned)
        k.wp_owned = out
        k.wp = out
    k.wndim = ndim
    for d in range(ndim):
        k.wdims[d] = dims[d]
    is_packed[0] = 1
    return NULL


cdef OrtStatus* _kernel_set_shared(OrtKernelImpl* this_ptr, const void* const* buffer_data_ptrs,
                                   const size_t* buffer_data_sizes, size_t num_buffers,
                                   int input_index) noexcept nogil:
    cdef onnxep_kernel* k = <onnxep_kernel*>this_ptr
    if input_index == 1 and num_buffers >= 1 and buffer_data_ptrs[0] != NULL:
        k.wp = <const float*>buffer_data_ptrs[0]
        shared_log_add(buffer_data_ptrs[0])
    return NULL


cdef float _attr_f(const OrtApi* api, const OrtKernelInfo* info, const char* name, float dflt) noexcept nogil:
    cdef float v = dflt
    cdef OrtStatus* st = api.KernelInfoGetAttribute_float(info, name, &v)
    if st != NULL:              # absent: the ONNX default
        api.ReleaseStatus(st)
        return dflt
    return v


cdef int64_t _attr_i(const OrtApi* api, const OrtKernelInfo* info, const char* name, int64_t dflt) noexcept nogil:
    cdef int64_t v = dflt
    cdef OrtStatus* st = api.KernelInfoGetAttribute_int64(info, name, &v)
    if st != NULL:              # absent: the ONNX default
        api.ReleaseStatus(st)
        return dflt
    return v


cdef OrtStatus* _create_kernel(void* state, const OrtKernelInfo* info, OrtKernelImpl** out) noexcept nogil:
    cdef onnxep_kstate* ks = <onnxep_kstate*>state
    cdef const OrtApi* api = ks.factory.api
    cdef onnxep_kernel* k = <onnxep_kernel*>calloc(1, sizeof(onnxep_kernel))
    out[0] = NULL
    if k == NULL:
        return api.CreateStatus(ORT_FAIL, "onnxep: out of memory creating a kernel")
    k.base.ort_version_supported = ONNXEP_ORT_API_VERSION
    k.base.flags = 0
    k.base.Compute = _kernel_compute
    k.base.Release = _kernel_release
    k.base.PrePackWeight = _kernel_prepack
    k.base.SetSharedPrePackedWeight = _kernel_set_shared
    k.api = api
    k.kind = ks.kind
    k.since = ks.since
    if ks.kind == ONNXEP_PK_LEAKY_RELU:
        k.p0 = _attr_f(api, info, "alpha", 0.01)
    elif ks.kind == ONNXEP_PK_HARD_SIGMOID:
        k.p0 = _attr_f(api, info, "alpha", 0.2)
        k.p1 = _attr_f(api, info, "beta", 0.5)
    elif ks.kind == ONNXEP_PK_SOFTMAX or ks.kind == ONNXEP_PK_LOG_SOFTMAX:
        k.axis = _attr_i(api, info, "axis", -1 if ks.since >= 13 else 1)
    elif ks.kind == ONNXEP_PK_CONV:
        k.group = _attr_i(api, info, "group", 1)
        k.nks = _attr_ints(api, info, "kernel_shape", k.kshape, 3)
        k.nstrides = _attr_ints(api, info, "strides", k.strides, 3)
        k.ndil = _attr_ints(api, info, "dilations", k.dil, 3)
        k.npads = _attr_ints(api, info, "pads", k.pads, 6)
        k.auto_pad = _auto_pad(api, info)
        if k.nks < 0 or k.nstrides < 0 or k.ndil < 0 or k.npads < 0 or k.auto_pad < 0:
            free(k)
            return api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: Conv attributes the plugin does not take "
                                                          "(rank above 3 or an unknown auto_pad)")
    elif ks.kind == ONNXEP_PK_GEMM:
        k.alpha = _attr_f(api, info, "alpha", 1.0)
        k.beta = _attr_f(api, info, "beta", 1.0)
        k.trans_a = _attr_i(api, info, "transA", 0) != 0
        k.trans_b = _attr_i(api, info, "transB", 0) != 0
    if ks.kind == ONNXEP_PK_CONV or ks.kind == ONNXEP_PK_GEMM or ks.kind == ONNXEP_PK_RELU:
        _fused_lookup(api, info, k)
    out[0] = &k.base
    return NULL


cdef int64_t _attr_ints(const OrtApi* api, const OrtKernelInfo* info, const char* name, int64_t* out,
                        size_t cap) noexcept nogil:
    """Length of int list attribute `name` read into out[:cap] (0 when absent, -1 when longer than cap)."""
    cdef int64_t tmp[16]
    cdef size_t n = 16, i
    cdef OrtStatus* st = api.KernelInfoGetAttributeArray_int64(info, name, tmp, &n)
    if st != NULL:
        api.ReleaseStatus(st)
        return 0
    if n > cap:
        return -1
    for i in range(n):
        out[i] = tmp[i]
    return <int64_t>n


cdef int64_t _auto_pad(const OrtApi* api, const OrtKernelInfo* info) noexcept nogil:
    cdef char buf[32]
    cdef size_t n = 32
    cdef OrtStatus* st = api.KernelInfoGetAttribute_string(info, "auto_pad", buf, &n)
    if st != NULL:
        api.ReleaseStatus(st)
        return 0
    if strcmp(buf, "NOTSET") == 0 or buf[0] == 0:
        return 0
    if strcmp(buf, "VALID") == 0:
        return 1
    if strcmp(buf, "SAME_UPPER") == 0:
        return 2
    if strcmp(buf, "SAME_LOWER") == 0:
        return 3
    return -1


cdef void _fused_lookup(const OrtApi* api, const OrtKernelInfo* info, onnxep_kernel* k) noexcept nogil:
    """A Conv / Gemm whose output GetCapability fused with an activation takes the activation in its epilogue; that
    activation (a Relu reading the value) becomes a pass-through."""
    cdef const OrtEp* ep = NULL
    cdef onnxep_ep* e
    cdef char name[256]
    cdef size_t n = 256, i
    cdef OrtStatus* st = api.GetEpApi().KernelInfo_GetEp(info, &ep)
    if st != NULL:
        api.ReleaseStatus(st)
        return
    e = <onnxep_ep*>ep
    if e == NULL or e.nfused == 0:
        return
    if k.kind == ONNXEP_PK_RELU:
        st = api.KernelInfo_GetInputName(info, 0, name, &n)
    else:
        st = api.KernelInfo_GetOutputName(info, 0, name, &n)
    if st != NULL:
        api.ReleaseStatus(st)
        return
    for i in range(e.nfused):
        if strcmp(e.fused[i].value, name) == 0:
            if k.kind == ONNXEP_PK_RELU:
                k.passthrough = 1
            else:
                k.act_kind, k.act_a, k.act_b = e.fused[i].act_kind, e.fused[i].a, e.fused[i].b
            return


# ---------------------------------------------------------------------------------------------------------------
# OrtEp

cdef const char* _ep_get_name(const OrtEp* this_ptr) noexcept nogil:
    return ONNXEP_EP_NAME


cdef OrtStatus* _ep_get_capability(OrtEp* this_ptr, const OrtGraph* graph,
                                   OrtEpGraphSupportInfo* support) noexcept nogil:
    """Claims each node that has a kernel in the registry (op, domain, opset range, float32 by the registry's type
    constraints) and whose arity the adapter takes (Max / Min: exactly two inputs)."""
    cdef onnxep_ep* e = <onnxep_ep*>this_ptr
    cdef onnxep_factory* f = e.factory
    cdef int claim
    cdef char* claimed
    cdef const OrtApi* api = f.api
    cdef const OrtEpApi* ep_api = f.ep_api
    cdef size_t n = 0, i, nin
    cdef const OrtNode** nodes
    cdef const OrtKernelDef* kdef
    cdef const char* op_type
    cdef OrtStatus* st
    if e.compile_mode:
        return _ep_get_capability_compile(e, graph, support)
    st = api.Graph_GetNumNodes(graph, &n)
    if st != NULL or n == 0:
        return st
    nodes = <const OrtNode**>malloc(n * sizeof(OrtNode*))
    if nodes == NULL:
        return api.CreateStatus(ORT_FAIL, "onnxep: out of memory in GetCapability")
    claimed = <char*>calloc(n, 1)
    if claimed == NULL:
        free(nodes)
        return api.CreateStatus(ORT_FAIL, "onnxep: out of memory in GetCapability")
    st = api.Graph_GetNodes(graph, nodes, n)
    i = 0
    while st == NULL and i < n:
        kdef = NULL
        st = ep_api.EpGraphSupportInfo_LookUpKernel(support, nodes[i], &kdef)
        if st == NULL and kdef != NULL:
            st = api.Node_GetOperatorType(nodes[i], &op_type)
            if st == NULL and (strcmp(op_type, "Max") == 0 or strcmp(op_type, "Min") == 0):
                st = api.Node_GetNumInputs(nodes[i], &nin)
                if st == NULL and nin != 2:
                    kdef = NULL
            if st == NULL and (strcmp(op_type, "Conv") == 0 or strcmp(op_type, "Gemm") == 0
                               or strcmp(op_type, "MatMul") == 0):
                claim = 0
                if strcmp(op_type, "Conv") != 0 or e.claim_conv:
                    st = _weight_claimable(api, nodes[i], strcmp(op_type, "Conv") == 0, &claim)
                if st == NULL and not claim:
                    kdef = NULL
                if st == NULL and claim and strcmp(op_type, "MatMul") != 0:
                    st = _fuse_activation(e, support, nodes[i])
            elif st == NULL and kdef != NULL:
                st = _after_cpu_fusable(api, nodes, claimed, n, nodes[i], &claim)
                if st == NULL and claim:
                    kdef = NULL
            if st == NULL and kdef != NULL:
                st = ep_api.EpGraphSupportInfo_AddSingleNode(support, nodes[i])
                claimed[i] = 1
        i += 1
    free(nodes)
    free(claimed)
    return st


cdef OrtStatus* _after_cpu_fusable(const OrtApi* api, const OrtNode** nodes, const char* claimed, size_t n,
                                   const OrtNode* node, int* out) noexcept nogil:
    """out = 1 when an input of this elementwise node comes from a node left to the CPU EP that the CPU EP fuses
    with what follows it (Conv, ConvTranspose, MatMul, Gemm, and an Add, which its Conv+Add+Relu fusion takes):
    claiming the node would split that fusion (measured: lone claimed activations after CPU convs made models
    0.83-2.3x slower, issue 28)."""
    cdef size_t nin = 0, j, t, idx
    cdef const OrtValueInfo* ins[8]
    cdef const OrtNode* prod
    cdef const char* ptype
    cdef OrtStatus* st = api.Node_GetNumInputs(node, &nin)
    out[0] = 0
    if st != NULL or nin == 0:
        return st
    if nin > 8:
        out[0] = 1
        return NULL
    st = api.Node_GetInputs(node, ins, nin)
    j = 0
    while st == NULL and j < nin and not out[0]:
        prod = NULL
        if ins[j] != NULL:
            st = api.ValueInfo_GetValueProducer(ins[j], &prod, &idx)
        if st == NULL and prod != NULL:
            st = api.Node_GetOperatorType(prod, &ptype)
            if st == NULL and (strcmp(ptype, "Conv") == 0 or strcmp(ptype, "ConvTranspose") == 0
                               or strcmp(ptype, "MatMul") == 0 or strcmp(ptype, "Gemm") == 0
                               or strcmp(ptype, "Add") == 0 or strcmp(ptype, "Sum") == 0):
                out[0] = 1
                for t in range(n):
                    if nodes[t] == prod:
                        out[0] = not claimed[t]
                        break
        j += 1
    return st


cdef OrtStatus* _weight_claimable(const OrtApi* api, const OrtNode* node, bint conv, int* claim) noexcept nogil:
    """Conv / Gemm / MatMul run on onnxep's packed SGEMM when their weight (input 1) is a constant initializer
    (packed once in PrePackWeight), 2-D for Gemm / MatMul."""
    cdef size_t nin = 0, ndim = 0
    cdef const OrtValueInfo* ins[3]
    cdef const OrtValue* v = NULL
    cdef int64_t dims[_PLUGIN_MAX_DIMS]
    cdef ort_bool const_init = 0
    cdef OrtStatus* st = api.Node_GetNumInputs(node, &nin)
    claim[0] = 0
    if st != NULL or nin < 2 or nin > 3:
        return st
    st = api.Node_GetInputs(node, ins, nin)
    if st == NULL and ins[1] != NULL:
        st = api.ValueInfo_IsConstantInitializer(ins[1], &const_init)
    if st != NULL or not const_init:
        return st
    st = api.ValueInfo_GetInitializerValue(ins[1], &v)
    if st == NULL and v != NULL:
        st = _tensor_shape(api, v, dims, &ndim, NULL)
    if st == NULL and v != NULL:
        claim[0] = (3 <= ndim <= 5) if conv else ndim == 2
    return st


cdef OrtStatus* _fuse_activation(onnxep_ep* e, OrtEpGraphSupportInfo* support, const OrtNode* node) noexcept nogil:
    """Record node's output as fused with the activation reading it when that activation is its only consumer, is
    not a graph output and has a kernel here (Relu): the producer's GEMM epilogue applies it."""
    cdef const OrtApi* api = e.factory.api
    cdef size_t nout = 0, ncons = 0, i
    cdef const OrtValueInfo* outv = NULL
    cdef const OrtNode* cons = NULL
    cdef int64_t idx = 0
    cdef ort_bool is_out = 0
    cdef const char* name = NULL
    cdef const char* op_type = NULL
    cdef const OrtKernelDef* kdef = NULL
    cdef onnxep_fused_act* grown
    cdef OrtStatus* st
    if not e.fuse_acts:
        return NULL
    st = api.Node_GetNumOutputs(node, &nout)
    if st != NULL or nout != 1:
        return st
    st = api.Node_GetOutputs(node, &outv, 1)
    if st == NULL:
        st = api.ValueInfo_IsGraphOutput(outv, &is_out)
    if st == NULL and not is_out:
        st = api.ValueInfo_GetValueNumConsumers(outv, &ncons)
    if st != NULL or is_out or ncons != 1:
        return st
    st = api.ValueInfo_GetValueConsumers(outv, &cons, &idx, 1)
    if st == NULL and cons != NULL:
        st = api.Node_GetOperatorType(cons, &op_type)
    if st != NULL or cons == NULL or strcmp(op_type, "Relu") != 0:
        return st
    st = e.factory.ep_api.EpGraphSupportInfo_LookUpKernel(support, cons, &kdef)
    if st == NULL:
        st = api.GetValueInfoName(outv, &name)
    if st != NULL or kdef == NULL or name == NULL or strlen(name) >= ONNXEP_FUSE_NAME_MAX:
        return st
    for i in range(e.nfused):
        if strcmp(e.fused[i].value, name) == 0:
            return NULL
    if e.nfused == e.cap_fused:
        grown = <onnxep_fused_act*>realloc(e.fused, (e.cap_fused * 2 + 16) * sizeof(onnxep_fused_act))
        if grown == NULL:
            return api.CreateStatus(ORT_FAIL, "onnxep: out of memory in GetCapability")
        e.fused = grown
        e.cap_fused = e.cap_fused * 2 + 16
    strcpy(e.fused[e.nfused].value, name)
    e.fused[e.nfused].act_kind = ACT_RELU
    e.fused[e.nfused].a = 0.0
    e.fused[e.nfused].b = 0.0
    e.nfused += 1
    return NULL


cdef OrtStatus* _ep_get_kernel_registry(OrtEp* this_ptr, const OrtKernelRegistry** out) noexcept nogil:
    out[0] = (<onnxep_ep*>this_ptr).factory.registry
    return NULL


# ---------------------------------------------------------------------------------------------------------------
# OrtEpFactory

cdef const char* _f_get_name(const OrtEpFactory* this_ptr) noexcept nogil:
    return ONNXEP_EP_NAME


cdef const char* _f_get_vendor(const OrtEpFactory* this_ptr) noexcept nogil:
    return ONNXEP_EP_VENDOR


cdef uint32_t _f_get_vendor_id(const OrtEpFactory* this_ptr) noexcept nogil:
    return 0


cdef const char* _f_get_version(const OrtEpFactory* this_ptr) noexcept nogil:
    return ONNXEP_EP_VERSION


cdef OrtStatus* _f_get_supported_devices(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                         size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                         size_t* num_ep_devices) noexcept nogil:
    """One OrtEpDevice, on the first CPU device."""
    cdef onnxep_factory* f = <onnxep_factory*>this_ptr
    cdef size_t i
    cdef OrtEpDevice* dev = NULL
    cdef OrtStatus* st
    num_ep_devices[0] = 0
    for i in range(num_devices):
        if max_ep_devices < 1:
            break
        if f.api.HardwareDevice_Type(devices[i]) == OrtHardwareDeviceType_CPU:
            st = f.ep_api.CreateEpDevice(this_ptr, devices[i], NULL, NULL, &dev)
            if st != NULL:
                return st
            ep_devices[0] = dev
            num_ep_devices[0] = 1
            break
    return NULL


cdef OrtStatus* _f_create_ep(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                             const OrtKeyValuePairs* const* ep_metadata_pairs, size_t num_devices,
                             const OrtSessionOptions* session_options, const OrtLogger* logger,
                             OrtEp** ep) noexcept nogil:
    cdef onnxep_factory* f = <onnxep_factory*>this_ptr
    cdef onnxep_ep* e = <onnxep_ep*>calloc(1, sizeof(onnxep_ep))   # every OrtEp slot not set below stays NULL
    ep[0] = NULL
    if e == NULL:
        return f.api.CreateStatus(ORT_FAIL, "onnxep: out of memory creating the EP")
    e.base.ort_version_supported = ONNXEP_ORT_API_VERSION
    e.base.GetName = _ep_get_name
    e.base.GetCapability = _ep_get_capability
    e.base.GetKernelRegistry = _ep_get_kernel_registry
    e.factory = f
    e.fuse_acts = 1
    e.claim_conv = _ep_option_int(f.api, session_options, "ep.onnxep.claim_conv", 0)
    # the compile path builds onnxep sessions in Python: off in a host without a Python interpreter
    e.compile_mode = _ep_option_int(f.api, session_options, "ep.onnxep.compile", 0) and Py_IsInitialized()
    e.nthreads = _ep_option_int(f.api, session_options, "ep.onnxep.threads", 0)
    e.precision_bf16 = _ep_option_is(f.api, session_options, "ep.onnxep.precision", "bf16")
    # EPContext export (onnxruntime's session config keys; Compile returns one EPContext node per fused graph)
    e.ctx_enable = _ep_option_int(f.api, session_options, "ep.context_enable", 0)
    e.ctx_embed = _ep_option_int(f.api, session_options, "ep.context_embed_mode", 0)
    e.ctx_path = _ep_option_str(f.api, session_options, "ep.context_file_path")
    if e.compile_mode:
        e.base.Compile = _ep_compile
        e.base.ReleaseNodeComputeInfos = _ep_release_infos
    ep[0] = &e.base
    return NULL


cdef void _f_release_ep(OrtEpFactory* this_ptr, OrtEp* ep) noexcept nogil:
    if ep != NULL:
        free((<onnxep_ep*>ep).fused)
        free((<onnxep_ep*>ep).ctx_path)
    free(ep)


cdef OrtStatus* _f_validate_compiled(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                     size_t num_devices, const char* compatibility_info,
                                     OrtCompiledModelCompatibility* out) noexcept nogil:
    out[0] = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE
    return NULL


cdef OrtStatus* _f_create_allocator(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                    const OrtKeyValuePairs* allocator_options,
                                    OrtAllocator** allocator) noexcept nogil:
    allocator[0] = NULL         # onnxruntime's default CPU allocator
    return NULL


cdef void _f_release_allocator(OrtEpFactory* this_ptr, OrtAllocator* allocator) noexcept nogil:
    pass


cdef OrtStatus* _f_create_data_transfer(OrtEpFactory* this_ptr, OrtDataTransferImpl** out) noexcept nogil:
    out[0] = NULL               # CPU memory only: nothing to copy between devices
    return NULL


cdef ort_bool _f_is_stream_aware(const OrtEpFactory* this_ptr) noexcept nogil:
    return 0


cdef OrtStatus* _f_create_sync_stream(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                      const OrtKeyValuePairs* stream_options,
                                      OrtSyncStreamImpl** stream) noexcept nogil:
    stream[0] = NULL
    return NULL


cdef OrtStatus* _f_hw_incompat(OrtEpFactory* this_ptr, const OrtHardwareDevice* hw,
                               OrtDeviceEpIncompatibilityDetails* details) noexcept nogil:
    return NULL                 # compatible: leave the details as onnxruntime made them


cdef OrtStatus* _f_create_importer(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                   OrtExternalResourceImporterImpl** out) noexcept nogil:
    out[0] = NULL
    return NULL


cdef OrtStatus* _f_num_custom_domains(OrtEpFactory* this_ptr, size_t* num_domains) noexcept nogil:
    num_domains[0] = 0
    return NULL


cdef OrtStatus* _f_custom_domains(OrtEpFactory* this_ptr, OrtCustomOpDomain** domains,
                                  size_t num_domains) noexcept nogil:
    return NULL


cdef OrtStatus* _build_registry(onnxep_factory* f) noexcept nogil:
    """One kernel def per row of onnxep_plugin_ops: ONNX domain, opset range, T = float32, EP onnxep."""
    cdef const OrtEpApi* ep = f.ep_api
    cdef const OrtDataType* t_float = NULL
    cdef OrtKernelDefBuilder* b
    cdef OrtKernelDef* kdef
    cdef int i
    cdef int zero = 0
    cdef OrtStatus* st = ep.CreateKernelRegistry(&f.registry)
    if st == NULL:
        st = ep.GetTensorDataType(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &t_float)
    i = 0
    while st == NULL and i < ONNXEP_PLUGIN_NROWS:
        b = NULL
        kdef = NULL
        f.kstates[i].factory = f
        f.kstates[i].kind = onnxep_plugin_ops[i].kind
        f.kstates[i].since = onnxep_plugin_ops[i].since_start
        st = ep.CreateKernelDefBuilder(&b)
        if st == NULL:
            st = ep.KernelDefBuilder_SetOperatorType(b, onnxep_plugin_ops[i].op_type)
        if st == NULL:
            st = ep.KernelDefBuilder_SetDomain(b, "")
        if st == NULL:
            st = ep.KernelDefBuilder_SetSinceVersion(b, onnxep_plugin_ops[i].since_start,
                                                     onnxep_plugin_ops[i].since_end)
        if st == NULL:
            st = ep.KernelDefBuilder_SetExecutionProvider(b, ONNXEP_EP_NAME)
        if st == NULL:
            st = ep.KernelDefBuilder_AddTypeConstraint(b, "T", &t_float, 1)
        if st == NULL and onnxep_plugin_ops[i].kind == ONNXEP_PK_RELU:   # in place: a fused Relu is a no-op
            st = ep.KernelDefBuilder_AddInputOutputMutableAliases(b, &zero, &zero, 1)
        if st == NULL:
            st = ep.KernelDefBuilder_Build(b, &kdef)
        if st == NULL:
            st = ep.KernelRegistry_AddKernel(f.registry, kdef, _create_kernel, &f.kstates[i])
        if kdef != NULL:
            ep.ReleaseKernelDef(kdef)
        if b != NULL:
            ep.ReleaseKernelDefBuilder(b)
        i += 1
    return st


cdef public OrtStatus* CreateEpFactories(const char* registered_name, const OrtApiBase* ort_api_base,
                                         const OrtLogger* default_logger, OrtEpFactory** factories,
                                         size_t max_factories, size_t* num_factories) noexcept nogil:
    """onnxruntime's entry point: one factory for EP `onnxep` on the CPU. No factory (and no error) when this
    onnxruntime predates ABI version 24 (GetApi(24) is NULL)."""
    cdef const OrtApi* api
    cdef onnxep_factory* f
    cdef OrtStatus* st
    num_factories[0] = 0
    if ort_api_base == NULL or max_factories < 1:
        return NULL
    api = ort_api_base.GetApi(ONNXEP_ORT_API_VERSION)
    if api == NULL:
        return NULL
    f = <onnxep_factory*>calloc(1, sizeof(onnxep_factory))
    if f == NULL:
        return api.CreateStatus(ORT_FAIL, "onnxep: out of memory creating the EP factory")
    f.api = api
    f.ep_api = api.GetEpApi()
    f.base.ort_version_supported = ONNXEP_ORT_API_VERSION
    f.base.GetName = _f_get_name
    f.base.GetVendor = _f_get_vendor
    f.base.GetSupportedDevices = _f_get_supported_devices
    f.base.CreateEp = _f_create_ep
    f.base.ReleaseEp = _f_release_ep
    f.base.GetVendorId = _f_get_vendor_id
    f.base.GetVersion = _f_get_version
    f.base.ValidateCompiledModelCompatibilityInfo = _f_validate_compiled
    f.base.CreateAllocator = _f_create_allocator
    f.base.ReleaseAllocator = _f_release_allocator
    f.base.CreateDataTransfer = _f_create_data_transfer
    f.base.IsStreamAware = _f_is_stream_aware
    f.base.CreateSyncStreamForDevice = _f_create_sync_stream
    f.base.GetHardwareDeviceIncompatibilityDetails = _f_hw_incompat
    f.base.CreateExternalResourceImporterForDevice = _f_create_importer
    f.base.GetNumCustomOpDomains = _f_num_custom_domains
    f.base.GetCustomOpDomains = _f_custom_domains
    st = _build_registry(f)
    if st != NULL:
        if f.registry != NULL:
            f.ep_api.ReleaseKernelRegistry(f.registry)
        free(f)
        return st
    factories[0] = &f.base
    num_factories[0] = 1
    return NULL


cdef public OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) noexcept nogil:
    cdef onnxep_factory* f = <onnxep_factory*>factory
    if f != NULL:
        if f.registry != NULL:
            f.ep_api.ReleaseKernelRegistry(f.registry)
        free(f)
    return NULL


# ---------------------------------------------------------------------------------------------------------------
# The compile path (EP option compile=1): GetCapability claims connected groups of nodes onnxep runs natively
# (onnxep/ort_compile.py decides, from onnxep's own op registry) with EpGraphSupportInfo_AddNodesToFuse;
# OrtEp::Compile turns each fused OrtGraph into an onnxep session (an onnx ModelProto built from the OrtGraph
# accessors, the GIL taken: Compile runs on the thread that creates the session); Compute runs that session's plan.

cdef object _ort_err(const OrtApi* api, OrtStatus* st):
    msg = (<bytes>api.GetErrorMessage(st)).decode("utf-8", "replace")
    api.ReleaseStatus(st)
    return RuntimeError("onnxruntime: " + msg)


cdef object _vi_desc(const OrtApi* api, const OrtValueInfo* v):
    """(name, elem_type, dims or None, initializer ndarray or None) of one OrtValueInfo."""
    import numpy as np
    cdef const char* name = NULL
    cdef const OrtTypeInfo* ti = NULL
    cdef const OrtTensorTypeAndShapeInfo* tinfo = NULL
    cdef OrtTensorTypeAndShapeInfo* vinfo = NULL
    cdef ONNXTensorElementDataType et
    cdef size_t nd = 0, i
    cdef int64_t dims[16]
    cdef const OrtValue* init = NULL
    cdef const void* p = NULL
    cdef OrtStatus* st
    if v == NULL:
        return ("", 0, None, None)
    st = api.GetValueInfoName(v, &name)
    if st != NULL:
        raise _ort_err(api, st)
    pyname = (<bytes>name).decode() if name != NULL else ""
    elem = 0
    shape = None
    st = api.GetValueInfoTypeInfo(v, &ti)
    if st == NULL and ti != NULL:
        st = api.CastTypeInfoToTensorInfo(ti, &tinfo)
        if st == NULL and tinfo != NULL:
            st = api.GetTensorElementType(tinfo, &et)
            if st == NULL:
                elem = <int>et
                st = api.GetDimensionsCount(tinfo, &nd)
            if st == NULL and nd <= 16:
                st = api.GetDimensions(tinfo, dims, nd)
                if st == NULL:
                    shape = [int(dims[i]) for i in range(nd)]
    if st != NULL:
        api.ReleaseStatus(st)
    arr = None
    st = api.ValueInfo_GetInitializerValue(v, &init)
    if st != NULL:
        api.ReleaseStatus(st)
        init = NULL
    if init != NULL:
        st = api.GetTensorTypeAndShape(init, &vinfo)
        if st != NULL:
            raise _ort_err(api, st)
        st = api.GetTensorElementType(vinfo, &et)
        if st == NULL:
            st = api.GetDimensionsCount(vinfo, &nd)
        if st == NULL and nd <= 16:
            st = api.GetDimensions(vinfo, dims, nd)
        api.ReleaseTensorTypeAndShapeInfo(vinfo)
        if st != NULL:
            raise _ort_err(api, st)
        st = api.GetTensorData(init, &p)
        if st != NULL:
            raise _ort_err(api, st)
        ishape = tuple(int(dims[i]) for i in range(nd))
        # a view of onnxruntime's initializer memory, valid while the OrtGraph lives: ort_compile copies what it
        # keeps past Compile unless it holds the view on purpose (Partition, in-place initializers)
        arr = _wrap_ptr(p, <int>et, ishape, False)
        elem = <int>et
        shape = list(ishape)
    return (pyname, elem, shape, arr)


_ONNX_NP = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
            10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


cdef object _wrap_ptr(const void* p, int et, tuple shape, bint copy):
    """An ndarray over onnxruntime's tensor memory (copied when `copy`; a view valid while the OrtValue lives)."""
    import numpy as np
    dt = _ONNX_NP.get(et)
    if dt is None:
        raise TypeError(f"onnxep plugin: tensor element type {et} is not supported by the compile path")
    dtype = np.dtype(dt)
    n = 1
    for d in shape:
        n *= d
    nbytes = n * dtype.itemsize
    if nbytes == 0 or p == NULL:
        return np.zeros(shape, dtype)
    a = np.frombuffer(<char[:nbytes]><char*>p, dtype=dtype).reshape(shape)
    return a.copy() if copy else a


cdef object _node_attrs(const OrtApi* api, const OrtNode* node, bint skip_cache=False):
    """{name: value} of the node's attributes, or None when one is a graph / tensor / strings (not handled).
    `skip_cache` (an EPContext node): its ep_cache_context, possibly megabytes, is left out (read at Compile)."""
    cdef size_t n = 0, i, need = 0
    cdef const OrtOpAttr** attrs
    cdef const char* aname = NULL
    cdef OrtOpAttrType t
    cdef int64_t iv
    cdef float fv
    cdef char* buf
    cdef OrtStatus* st = api.Node_GetNumAttributes(node, &n)
    if st != NULL:
        raise _ort_err(api, st)
    out = {}
    if n == 0:
        return out
    attrs = <const OrtOpAttr**>malloc(n * sizeof(OrtOpAttr*))
    try:
        st = api.Node_GetAttributes(node, attrs, n)
        if st != NULL:
            raise _ort_err(api, st)
        for i in range(n):
            st = api.OpAttr_GetName(attrs[i], &aname)
            if st == NULL:
                st = api.OpAttr_GetType(attrs[i], &t)
            if st != NULL:
                raise _ort_err(api, st)
            key = (<bytes>aname).decode()
            if skip_cache and key == "ep_cache_context":
                continue
            if t == ORT_OP_ATTR_INT:
                st = api.ReadOpAttr(attrs[i], t, &iv, sizeof(int64_t), &need)
                if st != NULL:
                    raise _ort_err(api, st)
                out[key] = int(iv)
            elif t == ORT_OP_ATTR_FLOAT:
                st = api.ReadOpAttr(attrs[i], t, &fv, sizeof(float), &need)
                if st != NULL:
                    raise _ort_err(api, st)
                out[key] = float(fv)
            elif t == ORT_OP_ATTR_INTS or t == ORT_OP_ATTR_FLOATS or t == ORT_OP_ATTR_STRING:
                need = 0
                st = api.ReadOpAttr(attrs[i], t, NULL, 0, &need)
                if st != NULL:
                    api.ReleaseStatus(st)
                buf = <char*>malloc(need + 8)
                try:
                    st = api.ReadOpAttr(attrs[i], t, buf, need, &need)
                    if st != NULL:
                        raise _ort_err(api, st)
                    raw = buf[:need]
                finally:
                    free(buf)
                if t == ORT_OP_ATTR_INTS:
                    import struct
                    out[key] = list(struct.unpack(f"<{need // 8}q", raw))
                elif t == ORT_OP_ATTR_FLOATS:
                    import struct
                    out[key] = list(struct.unpack(f"<{need // 4}f", raw))
                else:
                    out[key] = raw.rstrip(b"\0").decode()
            else:
                return None
        return out
    finally:
        free(attrs)


cdef object _node_desc(const OrtApi* api, const OrtNode* node, dict values):
    """One node as a dict for onnxep/ort_compile.py; its value infos land in `values` (name -> _vi_desc)."""
    cdef const char* s = NULL
    cdef int since = 0
    cdef size_t nin = 0, nout = 0, i
    cdef const OrtValueInfo** vis
    cdef OrtStatus* st
    d = {}
    st = api.Node_GetOperatorType(node, &s)
    if st != NULL:
        raise _ort_err(api, st)
    d["op"] = (<bytes>s).decode()
    st = api.Node_GetDomain(node, &s)
    if st != NULL:
        raise _ort_err(api, st)
    d["domain"] = (<bytes>s).decode() if s != NULL else ""
    st = api.Node_GetName(node, &s)
    if st != NULL:
        raise _ort_err(api, st)
    d["name"] = (<bytes>s).decode() if s != NULL else ""
    st = api.Node_GetSinceVersion(node, &since)
    if st != NULL:
        raise _ort_err(api, st)
    d["since"] = since
    d["attrs"] = _node_attrs(api, node, d["op"] == "EPContext" and d["domain"] == "com.microsoft")
    for key in ("inputs", "outputs"):
        if key == "inputs":
            st = api.Node_GetNumInputs(node, &nin)
        else:
            st = api.Node_GetNumOutputs(node, &nin)
        if st != NULL:
            raise _ort_err(api, st)
        names = []
        if nin:
            vis = <const OrtValueInfo**>malloc(nin * sizeof(OrtValueInfo*))
            try:
                if key == "inputs":
                    st = api.Node_GetInputs(node, vis, nin)
                else:
                    st = api.Node_GetOutputs(node, vis, nin)
                if st != NULL:
                    raise _ort_err(api, st)
                for i in range(nin):
                    if vis[i] == NULL:
                        names.append("")
                        continue
                    vd = _vi_desc(api, vis[i])
                    names.append(vd[0])
                    if vd[0] and vd[0] not in values:
                        values[vd[0]] = vd
            finally:
                free(vis)
        d[key] = names
    return d


cdef object _graph_nodes(const OrtApi* api, const OrtGraph* graph, const OrtNode*** out_nodes, size_t* out_n):
    cdef size_t n = 0
    cdef OrtStatus* st = api.Graph_GetNumNodes(graph, &n)
    if st != NULL:
        raise _ort_err(api, st)
    out_nodes[0] = <const OrtNode**>malloc((n + 1) * sizeof(OrtNode*))
    out_n[0] = n
    if n:
        st = api.Graph_GetNodes(graph, out_nodes[0], n)
        if st != NULL:
            free(out_nodes[0])
            out_nodes[0] = NULL
            raise _ort_err(api, st)
    return None


cdef OrtStatus* _ep_get_capability_compile(onnxep_ep* e, const OrtGraph* graph,
                                           OrtEpGraphSupportInfo* support) noexcept with gil:
    cdef const OrtApi* api = e.factory.api
    cdef const OrtNode** nodes = NULL
    cdef const OrtNode** group = NULL
    cdef size_t n = 0, i, k
    cdef OrtStatus* st = NULL
    try:
        from onnxep import ort_compile
        _graph_nodes(api, graph, &nodes, &n)
        values = {}
        descs = [_node_desc(api, nodes[i], values) for i in range(n)]
        groups = ort_compile.capability(descs, values)
        group = <const OrtNode**>malloc((n + 1) * sizeof(OrtNode*))
        for g in groups:
            k = 0
            for idx in g:
                group[k] = nodes[<size_t>idx]
                k += 1
            st = e.factory.ep_api.EpGraphSupportInfo_AddNodesToFuse(support, group, k, NULL)
            if st != NULL:
                break
    except BaseException as ex:
        msg = ("onnxep GetCapability: " + type(ex).__name__ + ": " + str(ex)).encode()
        st = api.CreateStatus(ORT_FAIL, msg)
    free(nodes)
    free(group)
    return st


ctypedef struct _onnxep_cinfo:
    OrtNodeComputeInfo base
    const OrtApi* api
    void* plan               # a strong reference to an ort_compile.Partition


cdef OrtStatus* _ci_create_state(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* ctx,
                                 void** state) noexcept nogil:
    state[0] = (<_onnxep_cinfo*>this_ptr).plan
    return NULL


cdef void _ci_release_state(OrtNodeComputeInfo* this_ptr, void* state) noexcept nogil:
    pass


cdef OrtStatus* _ci_compute(OrtNodeComputeInfo* this_ptr, void* state, OrtKernelContext* kctx) noexcept with gil:
    cdef _onnxep_cinfo* ci = <_onnxep_cinfo*>this_ptr
    cdef const OrtApi* api = ci.api
    cdef size_t nin = 0, i, k
    cdef Py_ssize_t nd
    cdef const OrtValue* v = NULL
    cdef OrtValue* y = NULL
    cdef OrtTensorTypeAndShapeInfo* info = NULL
    cdef ONNXTensorElementDataType et
    cdef int64_t dims[16]
    cdef const void* p = NULL
    cdef void* yp = NULL
    cdef OrtStatus* st = NULL
    try:
        part = <object>ci.plan
        feeds = {}
        for i, name in part.feed_index:
            st = api.KernelContext_GetInput(kctx, i, &v)
            if st != NULL:
                raise _ort_err(api, st)
            if v == NULL:
                continue
            st = api.GetTensorTypeAndShape(v, &info)
            if st != NULL:
                raise _ort_err(api, st)
            st = api.GetTensorElementType(info, &et)
            if st == NULL:
                st = api.GetDimensionsCount(info, &nin)
                nd = <Py_ssize_t>nin
            if st == NULL and nd > 16:
                st = api.CreateStatus(ORT_INVALID_ARGUMENT, "onnxep: more than 16 dimensions")
            if st == NULL:
                st = api.GetDimensions(info, dims, nd)
            api.ReleaseTensorTypeAndShapeInfo(info)
            if st != NULL:
                raise _ort_err(api, st)
            st = api.GetTensorData(v, &p)
            if st != NULL:
                raise _ort_err(api, st)
            feeds[name] = _wrap_ptr(p, <int>et, tuple(int(dims[k]) for k in range(<size_t>nd)), False)
        outs = part.run(feeds)
        for i in range(len(outs)):
            o = outs[i]
            nd = o.ndim
            if nd > 16:
                raise ValueError("onnxep: an output has more than 16 dimensions")
            for k in range(<size_t>nd):
                dims[k] = o.shape[k]
            st = api.KernelContext_GetOutput(kctx, i, dims, <size_t>nd, &y)
            if st != NULL:
                raise _ort_err(api, st)
            if o.nbytes:
                st = api.GetTensorMutableData(y, &yp)
                if st != NULL:
                    raise _ort_err(api, st)
                _copy_out(yp, o)
        return NULL
    except BaseException as ex:
        msg = ("onnxep: " + type(ex).__name__ + ": " + str(ex)).encode()
        return api.CreateStatus(ORT_FAIL, msg)


cdef object _copy_out(void* yp, object o):
    import numpy as np
    cdef Py_ssize_t nbytes = o.nbytes
    dst = np.frombuffer(<char[:nbytes]><char*>yp, dtype=o.dtype).reshape(o.shape)
    np.copyto(dst, o)


cdef object _attr_bytes(const OrtApi* api, const OrtNode* node, const char* name):
    """The bytes of the node's string attribute `name` exactly (binary content kept), or None when absent."""
    cdef const OrtOpAttr* a = NULL
    cdef size_t need = 0
    cdef char* buf
    cdef OrtStatus* st = api.Node_GetAttributeByName(node, name, &a)
    if st != NULL:
        api.ReleaseStatus(st)
        return None
    if a == NULL:
        return None
    st = api.ReadOpAttr(a, ORT_OP_ATTR_STRING, NULL, 0, &need)    # size query (an error status with the size)
    if st != NULL:
        api.ReleaseStatus(st)
    buf = <char*>malloc(need + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        st = api.ReadOpAttr(a, ORT_OP_ATTR_STRING, buf, need, &need)
        if st != NULL:
            raise _ort_err(api, st)
        if need and buf[need - 1] == 0:      # onnxruntime appends a terminating NUL and counts it
            need -= 1
        return buf[:need]
    finally:
        free(buf)


cdef object _graph_model_path(const OrtApi* api, const OrtGraph* graph):
    """The path of the model file the graph was loaded from ("" when loaded from bytes)."""
    cdef const char* p = NULL
    cdef OrtStatus* st = api.Graph_GetModelPath(graph, &p)
    if st != NULL:
        api.ReleaseStatus(st)
        return ""
    return (<bytes>p).decode("utf-8", "replace") if p != NULL else ""


cdef OrtNode* _create_ctx_node(const OrtApi* api, object spec) except NULL:
    """An EPContext OrtNode (model-editor API) from ort_compile.context_node_spec: (name, inputs, outputs, attrs)
    with attrs {name: int | bytes}. CreateNode copies the attributes; they are released here."""
    cdef const OrtModelEditorApi* me = api.GetModelEditorApi()
    cdef OrtNode* node = NULL
    cdef OrtOpAttr** attrs = NULL
    cdef const char** ins = NULL
    cdef const char** outs = NULL
    cdef size_t na = 0, i
    cdef int64_t iv
    cdef OrtStatus* st = NULL
    cdef bytes b
    if me == NULL:
        raise RuntimeError("onnxruntime offers no model-editor API (needed to return EPContext nodes)")
    name, inputs, outputs, amap = spec
    keep = [x.encode() for x in inputs] + [x.encode() for x in outputs]
    bname = name.encode()
    ins = <const char**>malloc((len(inputs) + 1) * sizeof(char*))
    outs = <const char**>malloc((len(outputs) + 1) * sizeof(char*))
    attrs = <OrtOpAttr**>calloc(len(amap) + 1, sizeof(OrtOpAttr*))
    try:
        if ins == NULL or outs == NULL or attrs == NULL:
            raise MemoryError()
        for i in range(len(inputs)):
            ins[i] = <const char*>(<bytes>keep[i])
        for i in range(len(outputs)):
            outs[i] = <const char*>(<bytes>keep[len(inputs) + i])
        for k, v in amap.items():
            bk = k.encode()
            if isinstance(v, int):
                iv = v
                st = api.CreateOpAttr(bk, &iv, 1, ORT_OP_ATTR_INT, &attrs[na])
            else:
                b = bytes(v)
                if len(b) > 0x7fffffff:
                    raise ValueError(f"EPContext attribute {k!r} holds {len(b)} bytes, more than onnxruntime takes")
                st = api.CreateOpAttr(bk, <const char*>b, <int>len(b), ORT_OP_ATTR_STRING, &attrs[na])
            if st != NULL:
                raise _ort_err(api, st)
            na += 1
        st = me.CreateNode("EPContext", "com.microsoft", bname, ins, len(inputs), outs, len(outputs), attrs, na, &node)
        if st != NULL:
            raise _ort_err(api, st)
        return node
    finally:
        for i in range(na):
            api.ReleaseOpAttr(attrs[i])
        free(attrs)
        free(ins)
        free(outs)


cdef OrtStatus* _ep_compile(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                            OrtNodeComputeInfo** infos, OrtNode** ep_context_nodes) noexcept with gil:
    """Builds one onnxep session per fused graph. A fused graph that is one of onnxep's own EPContext nodes is
    rebuilt from its blob (no passes, no packing); with ep.context_enable=1 every other fused graph also gets an
    EPContext node in ep_context_nodes (onnxruntime writes the _ctx.onnx model)."""
    cdef onnxep_ep* e = <onnxep_ep*>this_ptr
    cdef const OrtApi* api = e.factory.api
    cdef const OrtNode** nodes = NULL
    cdef size_t n = 0, i, c
    cdef _onnxep_cinfo* ci
    for c in range(count):
        infos[c] = NULL
        if e.ctx_enable and ep_context_nodes != NULL:
            ep_context_nodes[c] = NULL
    try:
        from onnxep import ort_compile
        opts = {"nthreads": e.nthreads, "precision": "bf16" if e.precision_bf16 else "fp32",
                "ctx_enable": bool(e.ctx_enable), "embed": e.ctx_embed,
                "ctx_path": (<bytes>e.ctx_path).decode("utf-8", "replace") if e.ctx_path != NULL else ""}
        for c in range(count):
            _graph_nodes(api, graphs[c], &nodes, &n)
            try:
                values = {}
                descs = [_node_desc(api, nodes[i], values) for i in range(n)]
                cache = None
                if n == 1 and ort_compile.is_own_context(descs[0]):
                    cache = _attr_bytes(api, nodes[0], "ep_cache_context")
            finally:
                free(nodes)
                nodes = NULL
            fvals = {}
            fused = _node_desc(api, fused_nodes[c], fvals)
            part, spec = ort_compile.compile_partition(descs, values, fused, cache,
                                                       _graph_model_path(api, graphs[c]), opts)
            if spec is not None and ep_context_nodes != NULL:
                ep_context_nodes[c] = _create_ctx_node(api, spec)
            ci = <_onnxep_cinfo*>calloc(1, sizeof(_onnxep_cinfo))
            if ci == NULL:
                raise MemoryError()
            ci.base.ort_version_supported = ONNXEP_ORT_API_VERSION
            ci.base.CreateState = _ci_create_state
            ci.base.Compute = _ci_compute
            ci.base.ReleaseState = _ci_release_state
            ci.api = api
            Py_INCREF(part)
            ci.plan = <void*>part
            infos[c] = &ci.base
        return NULL
    except BaseException as ex:
        msg = ("onnxep Compile: " + type(ex).__name__ + ": " + str(ex)).encode()
        return api.CreateStatus(ORT_FAIL, msg)


cdef void _ep_release_infos(OrtEp* this_ptr, OrtNodeComputeInfo** infos, size_t n) noexcept with gil:
    cdef size_t i
    cdef _onnxep_cinfo* ci
    for i in range(n):
        ci = <_onnxep_cinfo*>infos[i]
        if ci != NULL:
            if ci.plan != NULL:
                Py_DECREF(<object>ci.plan)
            free(ci)


cdef int _ep_option_int(const OrtApi* api, const OrtSessionOptions* so, const char* key, int dflt) noexcept nogil:
    cdef int has = 0
    cdef char buf[32]
    cdef size_t size = 32
    cdef OrtStatus* st
    if so == NULL:
        return dflt
    st = api.HasSessionConfigEntry(so, key, &has)
    if st != NULL:
        api.ReleaseStatus(st)
        return dflt
    if not has:
        return dflt
    st = api.GetSessionConfigEntry(so, key, buf, &size)
    if st != NULL:
        api.ReleaseStatus(st)
        return dflt
    return atoi(buf)


cdef char* _ep_option_str(const OrtApi* api, const OrtSessionOptions* so, const char* key) noexcept nogil:
    """A malloc'ed copy of the session config entry `key`, or NULL when it is not set (or empty)."""
    cdef int has = 0
    cdef size_t size = 0
    cdef char* buf
    cdef OrtStatus* st
    if so == NULL:
        return NULL
    st = api.HasSessionConfigEntry(so, key, &has)
    if st != NULL:
        api.ReleaseStatus(st)
        return NULL
    if not has:
        return NULL
    st = api.GetSessionConfigEntry(so, key, NULL, &size)     # size query (onnxruntime returns the size with an error)
    if st != NULL:
        api.ReleaseStatus(st)
    if size <= 1:
        return NULL
    buf = <char*>calloc(size + 1, 1)
    if buf == NULL:
        return NULL
    st = api.GetSessionConfigEntry(so, key, buf, &size)
    if st != NULL:
        api.ReleaseStatus(st)
        free(buf)
        return NULL
    return buf


cdef int _ep_option_is(const OrtApi* api, const OrtSessionOptions* so, const char* key, const char* value) noexcept nogil:
    cdef char* v = _ep_option_str(api, so, key)
    cdef int out = v != NULL and strcmp(v, value) == 0
    free(v)
    return out

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
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport strcmp

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
    ctypedef OrtStatus* (*OrtKernelCreateFunc)(void* state, const OrtKernelInfo* info,
                                               OrtKernelImpl** kernel_out) noexcept nogil

    struct OrtEpApi:
        OrtStatus* (*CreateEpDevice)(OrtEpFactory* ep_factory, const OrtHardwareDevice* hardware_device,
                                     const OrtKeyValuePairs* ep_metadata, const OrtKeyValuePairs* ep_options,
                                     OrtEpDevice** ep_device) noexcept nogil
        OrtStatus* (*EpGraphSupportInfo_AddSingleNode)(OrtEpGraphSupportInfo* info, const OrtNode* node) noexcept nogil
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
        OrtStatus* (*KernelContext_ParallelFor)(const OrtKernelContext* context, void (*fn)(void*, size_t) noexcept nogil,
                                                size_t total, size_t num_batch, void* usr_data) noexcept nogil

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
    ctypedef struct onnxep_ep:
        OrtEp base
        onnxep_factory* factory
    ctypedef struct onnxep_kernel:
        OrtKernelImpl base
        const OrtApi* api
        int kind
        float p0, p1
        int64_t axis
        int since

    ctypedef struct onnxep_abi_slot:
        const char* type
        const char* name
        long slot
    const onnxep_abi_slot* onnxep_abi_slots
    size_t ONNXEP_ABI_NSLOTS


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
    return api.KernelContext_ParallelFor(kctx, _ort_item, <size_t>n, 0, &job)


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


cdef OrtStatus* _kernel_compute(OrtKernelImpl* this_ptr, OrtKernelContext* ctx) noexcept nogil:
    cdef onnxep_kernel* k = <onnxep_kernel*>this_ptr
    if k.kind == ONNXEP_PK_SOFTMAX or k.kind == ONNXEP_PK_LOG_SOFTMAX:
        return _compute_softmax(k, ctx)
    if k.kind >= ONNXEP_PK_ADD:
        return _compute_binary(k, ctx)
    return _compute_unary(k, ctx)


cdef void _kernel_release(OrtKernelImpl* this_ptr) noexcept nogil:
    free(this_ptr)


cdef OrtStatus* _kernel_prepack(OrtKernelImpl* this_ptr, const OrtValue* tensor, int input_index,
                                OrtAllocator* allocator, OrtSharedPrePackedWeightCache* cache,
                                ort_bool* is_packed) noexcept nogil:
    is_packed[0] = 0            # no weights to pack in the elementwise kernels
    return NULL


cdef OrtStatus* _kernel_set_shared(OrtKernelImpl* this_ptr, const void* const* buffer_data_ptrs,
                                   const size_t* buffer_data_sizes, size_t num_buffers,
                                   int input_index) noexcept nogil:
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
    out[0] = &k.base
    return NULL


# ---------------------------------------------------------------------------------------------------------------
# OrtEp

cdef const char* _ep_get_name(const OrtEp* this_ptr) noexcept nogil:
    return ONNXEP_EP_NAME


cdef OrtStatus* _ep_get_capability(OrtEp* this_ptr, const OrtGraph* graph,
                                   OrtEpGraphSupportInfo* support) noexcept nogil:
    """Claims each node that has a kernel in the registry (op, domain, opset range, float32 by the registry's type
    constraints) and whose arity the adapter takes (Max / Min: exactly two inputs)."""
    cdef onnxep_factory* f = (<onnxep_ep*>this_ptr).factory
    cdef const OrtApi* api = f.api
    cdef const OrtEpApi* ep_api = f.ep_api
    cdef size_t n = 0, i, nin
    cdef const OrtNode** nodes
    cdef const OrtKernelDef* kdef
    cdef const char* op_type
    cdef OrtStatus* st = api.Graph_GetNumNodes(graph, &n)
    if st != NULL or n == 0:
        return st
    nodes = <const OrtNode**>malloc(n * sizeof(OrtNode*))
    if nodes == NULL:
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
            if st == NULL and kdef != NULL:
                st = ep_api.EpGraphSupportInfo_AddSingleNode(support, nodes[i])
        i += 1
    free(nodes)
    return st


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
    ep[0] = &e.base
    return NULL


cdef void _f_release_ep(OrtEpFactory* this_ptr, OrtEp* ep) noexcept nogil:
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

"""The texts that the name patterns of tracedoc's own modules require (``literals.required_texts``), worked out
ahead of time: parsing them again with ``re``'s pure-Python parser at first use costs about 5 ms in every
process. Keyed by (pattern, flags); a pattern not here is parsed when first asked about. Generated;
``tests/test_literals.py`` checks every entry against the parser and that every module-level pattern is here,
and prints the table to paste when they differ.
"""

KNOWN: dict[tuple[str, int], tuple[tuple[str, ...], ...]] = {
    ('(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll|Gather|Scatter)', 34):
        (('broadcast', 'reduce', 'send', 'recv', 'alltoall', 'gather', 'scatter'),),
    ('(HtoD|DtoH|DtoD|PtoP|HtoH)(?:\\s*\\((\\w+)\\s*->\\s*(\\w+)\\))?', 34):
        (('htod', 'dtoh', 'dtod', 'ptop', 'htoh'),),
    ('(^|\\W)DataParallel|^Broadcast$|torch\\.nn\\.parallel\\.(replicate|scatter_gather)', 34):
        (('dataparallel', 'broadcast', 'torch.nn.parallel.'),),
    ('(elementwise|vectorized|reduce|reduction|softmax|layer_?norm|batch_?norm|norm_|index|scatter|gather|copy|cat|fill|where|unrolled|pointwise|triton_(poi|red|per)|embedding|sort|topk|cumsum|dropout|adam|sgd|multi_tensor|foreach|relu|gelu|silu|sigmoid|tanh|pool|upsample|arange|memcpy|memset|distribution|random|philox|transpose|permute|nchw|nhwc|compute_|fft|bn_fw|bn_bw|_bn_|im2col|col2im|nll_loss|cross_entropy|adaptive_|Offsets?Kernel|splitKreduce|cub::|Scan|GammaBeta|_offsets|bounds_check|quantize|to_float|histogram|unique|masked|clamp|rms_?norm|SubTensorOp|Op\\dd?TensorGeneric)', 34):
        (('elementwise', 'vectorized', 'reduce', 'reduction', 'softmax', 'layer', 'batch', 'index', 'gather', 'copy', 'cat', 'fill', 'where', 'unrolled', 'pointwise', 'triton_', 'embedding', 'sort', 'topk', 'cumsum', 'dropout', 'adam', 'sgd', 'multi_tensor', 'foreach', 'relu', 'gelu', 'silu', 'sigmoid', 'tanh', 'pool', 'upsample', 'arange', 'memcpy', 'memset', 'distribution', 'random', 'philox', 'transpose', 'permute', 'nchw', 'nhwc', 'compute_', 'fft', 'bn_fw', 'bn_bw', '_bn_', 'im2col', 'col2im', 'nll_loss', 'cross_entropy', 'adaptive_', 'offset', 'cub::', 'scan', 'gammabeta', 'bounds_check', 'quantize', 'to_float', 'histogram', 'unique', 'masked', 'clamp', 'norm', 'subtensorop', 'tensorgeneric'),),
    ('(ffma|sgemm|dgemm|gemmSN|gemv|scudnn|dcudnn|_s\\d+gemm|winograd|implicit_convolve_sgemm|dgrad_engine|wgrad_alg|fprop_engine|conv2d_grouped_direct|depthwise)', 34):
        (('ffma', 'gemv', 'scudnn', 'dcudnn', 'gemm', 'winograd', 'dgrad_engine', 'wgrad_alg', 'fprop_engine', 'conv2d_grouped_direct', 'depthwise'),),
    ('(gemm|gemv|conv|matmul|linear|bmm|attention|attn|fmha|mma|winograd|cudnn)', 34):
        (('gemm', 'gemv', 'conv', 'matmul', 'linear', 'bmm', 'attention', 'attn', 'fmha', 'mma', 'winograd', 'cudnn'),),
    ('(h884|h1688|s1688|i8816|i16832|h16816|s16816|bf16816|tf32|hmma|imma|16816|1688|884gemm|xmma|wgmma|(?<!sub)tensorop|tensorcore|_tc_|nvjet|sm(80|86|89|90|90a|100|100a|120)_xmma|sm(80|86|89|90|100|120)_.*(gemm|conv)|cutlass.*(s|h|bf)16816|gmma|mma_|flash_fwd|flash_bwd|fmha|flash::|cudnn_.*_hmma|ampere_.*(h|bf|s)16816|ampere_fp16|ampere_bf16|turing_fp16|volta_h884|volta_fp16|hopper_|sm90_|cublasLt.*tensor)', 34):
        (('h884', 'i8816', 'i16832', 'tf32', 'hmma', 'imma', '16816', '1688', 'xmma', 'tensorop', 'tensorcore', '_tc_', 'nvjet', 'gemm', 'conv', 'cutlass', 'gmma', 'mma_', 'flash_fwd', 'flash_bwd', 'fmha', 'flash::', 'cudnn_', 'ampere_', 'turing_fp16', 'volta_fp16', 'hopper_', 'sm90_', 'cublaslt'),),
    ('(igemm_(fwd|bwd|wrw)|implicit_?gemm|gridwise_(convolution|gemm)|naive_conv|MIOpenConv|Asm_?Conv|conv_?(fwd|bwd|wrw)|Cijk_|xdlops|fft2d_|cgemm|winograd|_conv_)', 34):
        (('igemm_', 'implicit', 'gridwise_', 'conv', 'cijk_', 'xdlops', 'fft2d_', 'cgemm', 'winograd'),),
    ('<\\s*float\\s*[,>]|\\bfloat\\s*,\\s*float\\b', 32):
        (('float',),),
    ('Backward\\d*$|^autograd::engine::evaluate_function', 32):
        (('Backward', 'autograd::engine::evaluate_function'),),
    ('\\(byte (\\d+)\\)', 32):
        (('(byte ',), (')',)),
    ('\\.(json|json\\.gz|sqlite|sqlite3)$', 34):
        (('.',), ('json', 'sqlite')),
    ('\\bhalf\\b|__half|half_t|bf16|bfloat16|fp16|\\bf16|f16f16|tf32|int8|fp8|e4m3|e5m2|hmma|imma|wgmma|mma_sync', 34):
        (('half', 'bfloat16', 'fp16', 'f16', 'tf32', 'int8', 'fp8', 'e4m3', 'e5m2', 'hmma', 'imma', 'wgmma', 'mma_sync'),),
    ('^(?:(?:aten|flash_attn)::\\w*(?:mm|mv|matmul|linear|einsum|conv|attention|attn)\\w*|aten::(?:(?:add|sub|mul|div|neg|exp|log|sqrt|rsqrt|pow|abs|relu|clamp|clamp_min|clamp_max|gelu|silu|sigmoid|tanh|where|masked_fill|square|reciprocal|hardtanh|leaky_relu|elu|softplus|mish|hardswish|hardsigmoid|minimum|maximum|eq|ne|lt|le|gt|ge|logical_not|bitwise_and|erf|sin|cos|floor|sign|addcmul|addcdiv|lerp|threshold|fill|zero|copy|_to_copy|clone|contiguous|cat|stack|sum|mean|amax|amin|prod|any|all|argmax|argmin|var|std|var_mean|std_mean|embedding|index_select)_?|\\w+_backward(?:_data)?|_foreach_\\w+|_fused_\\w+|\\w*norm\\w*|_?\\w*softmax\\w*|\\w*pool\\d?d\\w*|native_dropout\\w*)|triton_\\w+|torch::autograd::AccumulateGrad)$', 32):
        (('aten', 'flash_attn', 'triton_', 'torch::autograd::AccumulateGrad'),),
    ('^(aten::_local_scalar_dense|aten::item)$', 32):
        (('aten::',), ('_local_scalar_dense', 'item')),
    ('^(cudaFree|cuMemFree|hipFree)(_v\\d+)?$', 32):
        (('cudaFree', 'cuMemFree', 'hipFree'),),
    ('^(cudaFree|cudaFreeHost|cudaMalloc|cudaMallocHost|cudaHostAlloc|cudaHostRegister|cudaHostUnregister|cuMemFree|cuMemAlloc|cuMemHostAlloc|cuMemFreeHost|hipFree|hipHostFree|hipMalloc|hipHostMalloc|hipHostRegister)(_v\\d+)?$', 32):
        (('cudaFree', 'cudaMalloc', 'cudaHostAlloc', 'cudaHostRegister', 'cudaHostUnregister', 'cuMemFree', 'cuMemAlloc', 'cuMemHostAlloc', 'hipFree', 'hipHostFree', 'hipMalloc', 'hipHostMalloc', 'hipHostRegister'),),
    ('^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)(_v\\d+)?$', 32):
        (('cudaGraphLaunch', 'cuGraphLaunch', 'hipGraphLaunch'),),
    ('^(cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel|cuLaunchKernel|cuLaunchKernelEx|cudaMemcpyAsync|cudaMemsetAsync|cudaMemcpy|cudaMemset|hipLaunchKernel|hipExtLaunchKernel|hipModuleLaunchKernel|hipMemcpyAsync|hipMemsetAsync|cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch|cudaLaunchHostFunc|cudaLaunchKernel_ptsz)(_v\\d+)?$', 32):
        (('cudaLaunchKernel', 'cudaLaunchCooperativeKernel', 'cuLaunchKernel', 'cudaMemcpy', 'cudaMemset', 'hipLaunchKernel', 'hipExtLaunchKernel', 'hipModuleLaunchKernel', 'hipMemcpyAsync', 'hipMemsetAsync', 'cudaGraphLaunch', 'cuGraphLaunch', 'hipGraphLaunch', 'cudaLaunchHostFunc'),),
    ('^(cudaMalloc|cuMemAlloc|hipMalloc)(_v\\d+)?$', 32):
        (('cudaMalloc', 'cuMemAlloc', 'hipMalloc'),),
    ('^(cudaMemcpy|hipMemcpy|cuMemcpyDtoH|cuMemcpyHtoD)(_v\\d+)?$', 32):
        (('cudaMemcpy', 'hipMemcpy', 'cuMemcpyDtoH', 'cuMemcpyHtoD'),),
    ('^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaStreamWaitEvent|hipStreamSynchronize|hipDeviceSynchronize|hipEventSynchronize|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize|cudaMemcpy|hipMemcpy|cuMemcpyDtoH|cuMemcpyHtoD)(_v\\d+)?$', 32):
        (('cudaStreamSynchronize', 'cudaDeviceSynchronize', 'cudaEventSynchronize', 'cudaStreamWaitEvent', 'hipStreamSynchronize', 'hipDeviceSynchronize', 'hipEventSynchronize', 'cuStreamSynchronize', 'cuCtxSynchronize', 'cuEventSynchronize', 'cudaMemcpy', 'hipMemcpy', 'cuMemcpyDtoH', 'cuMemcpyHtoD'),),
    ('^(cudaStreamWaitEvent|hipStreamWaitEvent)', 32):
        (('cudaStreamWaitEvent', 'hipStreamWaitEvent'),),
    ('^(record_param_comms$|nccl:|c10d::|gloo:)', 32):
        (('record_param_comms', 'nccl:', 'c10d::', 'gloo:'),),
    ('^(record_param_comms$|nccl:|c10d::|gloo:|nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|Alltoall)\\b)', 32):
        (('record_param_comms', 'c10d::', 'gloo:', 'nccl'),),
    ('^(record_param_comms$|nccl:|gloo:)', 32):
        (('record_param_comms', 'nccl:', 'gloo:'),),
    ('^(triton_\\w+?)_\\d+$', 32):
        (('triton_',), ('_',)),
    ('^CompiledFunction|Torch-Compiled Region|^## Call CompiledFxGraph', 32):
        (('CompiledFunction', 'Torch-Compiled Region', '## Call CompiledFxGraph'),),
    ('^Optimizer\\.step#', 32):
        (('Optimizer.step#',),),
    ('^ProfilerStep#(\\d+)$', 32):
        (('ProfilerStep#',),),
    ('^Torch-Compiled Region: \\d+/\\d+$', 32):
        (('Torch-Compiled Region: ',), ('/',)),
    ('^\\s*(?P<fam>profiler[ _]?step|train(?:ing)?[ _\\-]?step|step|train[ _\\-]?iter(?:ation)?|'
     'iteration|iter)(?:[\\s_#:=\\-]*\\d+)?\\s*(?:,\\s*(?:seq|op_id|sizes|stream)\\b.*)?$', 34):
        (('profiler', 'train', 'step', 'iter'),),
    ('^\\s*([a-zA-Z]*)\\s*,\\s*([a-zA-Z]*)\\s*(?:->\\s*([a-zA-Z]*)\\s*)?$', 32):
        ((',',),),
    ('^\\s*stream\\s+(\\d+)', 34):
        (('stream',),),
    ('^aten::(_?softmax|_softmax_backward_data|_masked_softmax\\w*|_scaled_dot_product_attention_math)$', 32):
        (('aten::',), ('softmax', '_scaled_dot_product_attention_math')),
    ('^aten::(mm|matmul|addmm|addmv|bmm|baddbmm|linear|conv\\w*|_convolution\\w*|cudnn_convolution\\w*|_scaled_dot_product\\w*|scaled_dot_product\\w*|einsum|_flash_attention\\w*|_efficient_attention\\w*|addbmm|tensordot|mkldnn_convolution|miopen_convolution\\w*)$', 32):
        (('aten::',), ('mm', 'matmul', 'addmv', 'linear', 'conv', 'scaled_dot_product', 'einsum', '_flash_attention', '_efficient_attention', 'tensordot')),
    ('^enumerate\\((DataLoader|DataPipe)\\)#|DataLoader.*__next__|dataloader', 34):
        (('enumerate(', 'dataloader'),),
    ('^nn\\.Module: (.+)$', 32):
        (('nn.Module: ',),),
    ('_MultiProcessingDataLoaderIter', 34):
        (('_multiprocessingdataloaderiter',),),
    ('_SingleProcessDataLoaderIter', 34):
        (('_singleprocessdataloaderiter',),),
    ('conv|fprop|dgrad|wgrad|winograd|implicit_gemm|cudnn|im2col|col2im', 34):
        (('conv', 'fprop', 'dgrad', 'wgrad', 'winograd', 'implicit_gemm', 'cudnn', 'im2col', 'col2im'),),
    ('dgrad', 34):
        (('dgrad',),),
    ('elementwise|vectorized|unrolled|pointwise|triton_poi_|fill|copy|cat_|where|relu|gelu|silu|sigmoid|tanh|dropout|clamp|masked|index|scatter|gather|embedding|transpose|permute|adam|sgd|multi_tensor|foreach|pool|upsample|arange|random|philox|distribution|compare|bitwise|pow|exp|log|sqrt|add|mul|div', 34):
        (('elementwise', 'vectorized', 'unrolled', 'pointwise', 'triton_poi_', 'fill', 'copy', 'cat_', 'where', 'relu', 'gelu', 'silu', 'sigmoid', 'tanh', 'dropout', 'clamp', 'masked', 'index', 'scatter', 'gather', 'embedding', 'transpose', 'permute', 'adam', 'sgd', 'foreach', 'pool', 'upsample', 'arange', 'random', 'philox', 'distribution', 'compare', 'bitwise', 'pow', 'exp', 'log', 'sqrt', 'add', 'mul', 'div'),),
    ('empty_cache|emptyCache', 32):
        (('empty',), ('_cache', 'Cache')),
    ('ffma|_fp64_|dgemm|sgemm_(?!.*tensorop)', 34):
        (('ffma', '_fp64_', 'dgemm', 'sgemm_'),),
    ('flash|fmha|attention|attn|sdpa', 34):
        (('flash', 'fmha', 'attention', 'attn', 'sdpa'),),
    ('gemm|gemv|Cijk_|matmul|nvjet|cutlass|xmma|wgmma|hmma|imma|(?<![a-z])mma|cublas', 34):
        (('gemm', 'gemv', 'cijk_', 'matmul', 'nvjet', 'cutlass', 'mma', 'cublas'),),
    ('nccl|rccl|hccl', 34):
        (('nccl', 'rccl', 'hccl'),),
    ('norm|bn_fw|bn_bw|_bn_|GammaBeta', 34):
        (('norm', 'bn_fw', 'bn_bw', '_bn_', 'gammabeta'),),
    ('reduce|reduction|softmax|cumsum|scan|argmax|argmin|topk|sort|triton_(red|per)_|nll_loss|cross_entropy|histogram|unique', 34):
        (('reduce', 'reduction', 'softmax', 'cumsum', 'scan', 'argmax', 'argmin', 'topk', 'sort', 'triton_', 'nll_loss', 'cross_entropy', 'histogram', 'unique'),),
    ('wait|work|init|destroy|allocate|record_param_comms_noop', 34):
        (('wait', 'work', 'init', 'destroy', 'allocate', 'record_param_comms_noop'),),
    ('wgrad', 34):
        (('wgrad',),),
}

"""One module per notebook: its experiments (registered by ``@experiment``) and the tables and figures
it shows. Importing this package registers every experiment; a lab never imports another lab."""
from course_lib.labs import (  # noqa: F401
                             async_pipelines,
                             attention,
                             coalescing,
                             failure_lab,
                             fusion,
                             gemm_ladder,
                             hopper_gemm,
                             multi_gpu,
                             occupancy,
                             roofline,
                             shared_memory,
                             threads_warps,
                             transformer_layer,
                             waves,
                             your_gpu,
)

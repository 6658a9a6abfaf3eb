"""One module per notebook: its experiments (registered by ``@experiment``) and the tables and figures
it shows. Importing this package registers every experiment; a lab never imports another lab."""
from course_lib.labs import (  # noqa: F401
                             async_pipelines,
                             failure_lab,
                             fusion,
                             gemm_ladder,
                             hopper_gemm,
                             memory,
                             occupancy,
                             roofline,
                             threads_warps,
                             waves,
                             your_gpu,
)

"""The names :mod:`kernel_harness.run.source_rules` looks for in an implementation's source,
by kind (dotted, after resolving the module's aliases), the kinds, and the packages it never
reads."""

from __future__ import annotations

#: The kinds of finding (each says what such a line can do).
OBSERVES = "observes the harness"
CLOCK_KIND = "reads the clock"
STATE = "keeps state across calls"
TRACED = "tells traced from eager"
PRECISION_KIND = "reads jax's precision context"
BACKEND_KIND = "branches on the backend"
PROCESS_KIND = "reads the process or host"
CONFIG_KIND = "reads jax's configuration"
ALIASING_KIND = "tells aliased arguments apart"
HIDDEN_KIND = "runs code it does not show"

#: Packages whose code is not the implementation's: neither read nor followed.
TRUSTED = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "hypothesis", "pytest",
                     "_pytest", "kernel_harness", "scipy", "opt_einsum", "typing_extensions"})

#: Dotted names (after resolving the module's aliases) each kind looks for.
OBSERVE = frozenset({
    "sys.modules", "sys._getframe", "sys.settrace", "sys.gettrace", "sys.setprofile",
    "sys.getprofile", "sys.argv", "inspect.stack", "inspect.currentframe",
    "inspect.getouterframes", "inspect.trace", "inspect.getframeinfo",
    "traceback.extract_stack", "traceback.format_stack", "traceback.walk_stack",
    "traceback.print_stack", "gc.get_referrers", "gc.get_objects", "builtins.__import__",
    "importlib.util.find_spec", "os.environ.PYTEST_CURRENT_TEST",
})
CLOCK = frozenset({
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
    "time.perf_counter_ns", "time.process_time", "time.localtime", "time.gmtime",
    "time.ctime", "datetime.date.today", "datetime.datetime.now", "datetime.datetime.today",
    "datetime.datetime.utcnow", "time.strftime", "time.asctime", "time.clock_gettime",
    "time.clock_gettime_ns", "time.thread_time", "time.thread_time_ns", "os.times",
    "uuid.uuid1", "uuid.uuid6", "uuid.uuid7",  # time-based: a clock read by another name
})
#: What differs between processes and hosts (round 8: one process in 61 by its pid, a TPU
#: pod's host list in the environment): a check's process is not a user's.
PROCESS = frozenset({"os.getpid", "os.getppid", "os.environ", "os.getenv", "os.environb",
                     "os.getlogin", "os.uname", "os.urandom", "socket.gethostname",
                     "platform.node", "uuid.uuid4", "uuid.getnode"})
#: Modules any of whose functions draws unseeded randomness or reads the process.
PROCESS_MODULES = frozenset({"random", "secrets"})
#: Attributes only a concrete array has, not a tracer (round 8: ``hasattr(x,
#: "copy_to_host_async")`` to tell an eager call from a traced one).
CONCRETE_ONLY = frozenset({"copy_to_host_async", "addressable_shards", "addressable_data",
                           "is_fully_addressable", "unsafe_buffer_pointer",
                           "on_device_size_in_bytes", "device_buffer", "device_buffers",
                           "is_deleted", "_value", "_npy_value", "_arrays", "committed",
                           "_committed", "is_fully_replicated", "global_shards",
                           "__cuda_array_interface__",
                           "__dlpack__", "__dlpack_device__"})
#: Modules whose attributes a kernel has no reason to read by a computed name
#: (``getattr(sys, "mod" + "ules")``: a lookup spelled so that no line names it).
INTROSPECTION = frozenset({"sys", "os", "inspect", "traceback", "gc", "builtins", "importlib",
                           "time", "datetime", "uuid"})
#: Calls that read or write a file: state that outlives the call and the process (a
#: counter kept in a temp file).
FILES = frozenset({"open", "io.open", "os.open", "os.fdopen", "os.path.getsize",
                   "os.path.getmtime", "os.stat", "shelve.open", "dbm.open", "sqlite3.connect",
                   # a directory as a marker (round 7: os.makedirs, then os.listdir)
                   "os.listdir", "os.scandir", "os.makedirs", "os.mkdir", "os.path.exists",
                   "os.path.isdir", "os.path.isfile", "os.remove", "os.unlink", "os.rename",
                   "os.replace", "os.rmdir", "os.walk", "glob.glob", "glob.iglob",
                   "shutil.rmtree", "tempfile.mkstemp", "tempfile.mkdtemp",
                   "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile"})
FILE_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "mkdir",
                          "iterdir", "touch", "unlink", "rmdir", "is_dir", "is_file"})
#: Attributes of a ``functools`` cache that count the process's calls (round 7: a bomb
#: after 600 shapes read from ``cache_info().currsize``).
CACHE_STATS = frozenset({"cache_info", "cache_parameters", "currsize"})
#: Methods that change a list, dict, set or array in place (a call counter need not add).
MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop",
                       "popitem", "remove", "discard", "clear", "__setitem__", "fill"})
TRACER = ("jax.core.Tracer", "jax._src.core.Tracer", "jax.core.is_concrete",
           "jax._src.core.is_concrete")
PRECISION = ("default_matmul_precision.value", "jax.config.jax_default_matmul_precision")
#: Calls that change jax's configuration for the whole process (any dotted name under jax
#: ending so: ``jax.config.update``, ``jax._src.config.config.update``).
CONFIG_WRITES = (".config.update", ".config.parse_flags_with_absl")
BACKEND = ("jax.default_backend", "jax._src.xla_bridge.default_backend")
#: Strings naming the harness or the test runners.
NAMES = ("kernel_harness", "hypothesis", "pytest", "PYTEST_CURRENT_TEST")

#: The standard library a kernel's Python may name: arithmetic on scalars, functional
#: helpers, types and containers, text, warnings and logging calls. Any other module of the
#: standard library (``os``, ``sys``, ``socket``, ``threading``, ``resource``, ``ctypes``,
#: ``signal``, ``pathlib``...) reads or changes the process or its host, which no kernel's
#: arithmetic needs and a check's process does not share with a user's: an allowlist, so
#: a module no rule names is read too (rounds 4-8 each found one the denylists missed).
COMPUTATION_STDLIB = frozenset({
    "__future__", "abc", "array", "bisect", "builtins", "cmath", "collections", "contextlib",
    "copy", "dataclasses", "decimal", "enum", "fractions", "functools", "heapq", "itertools",
    "json", "keyword", "math", "numbers", "operator", "re", "statistics", "string", "struct",
    "textwrap", "types", "typing", "weakref"})
#: Modules of which only these names are computation (the rest of ``logging`` and
#: ``warnings`` reads the handlers and filters pytest installs; ``sys``'s the process).
COMPUTATION_PARTS = {
    "logging": frozenset({"getLogger", "debug", "info", "warning", "error", "exception",
                          "log", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}),
    "warnings": frozenset({"warn", "warn_explicit", "catch_warnings", "simplefilter",
                           "filterwarnings"}),
    "sys": frozenset({"platform", "version_info", "maxsize", "float_info", "byteorder",
                      "hexversion", "int_info"}),
    "time": frozenset({"sleep"}),  # waits; reads nothing (the clock's readers: CLOCK)
}
#: How a name of the standard library outside :data:`COMPUTATION_STDLIB` is said.
HOST_MODULE = "uses"
#: How a draw from numpy's global random state is named (not where the function seeds it).
NUMPY_RANDOM = "draws from numpy's global random state"
#: Builtins whose answer differs between processes (an object's address; a string's hash,
#: salted per process).
PROCESS_BUILTINS = frozenset({"id", "hash"})
#: Builtins that run code built at run time, which the source check cannot read.
HIDDEN = frozenset({"eval", "exec", "compile"})
#: Strings that name what a traced value is and a concrete one is not (``"Traced" in
#: str(x)``, ``type(x).__name__ == "ArrayImpl"``).
TRACER_STRINGS = ("Traced", "Tracer", "ArrayImpl", "ConcreteArray", "DynamicJaxpr")
#: jax's namespaces of the tracing machinery: a name there that says trace, tracer,
#: concrete or jit asks how the code is being run (``trace_ctx``, ``find_top_trace``,
#: ``unsafe_am_i_under_a_jit_DO_NOT_USE``, a ``BatchTracer``).
TRACING_MODULES = ("jax.core.", "jax._src.core.", "jax.extend.core.", "jax.interpreters.",
                   "jax._src.interpreters.", "jax._src.api.", "jax.api_util.")
TRACING_WORDS = ("trace", "concrete", "jit")
#: jax's errors a traced value raises where an eager one converts (a ``try`` catching one
#: tells the two apart).
TRACER_ERRORS = ("ConcretizationTypeError", "TracerBoolConversionError",
                 "TracerArrayConversionError", "TracerIntegerConversionError",
                 "UnexpectedTracerError", "NonConcreteBooleanIndexError")
#: Calls that bring an array to the host (raise under a trace): inside a ``try`` whose
#: handler catches their error, an eager call takes the body and a traced one the handler.
HOST_CONVERSIONS = frozenset({"float", "int", "bool", "complex", "numpy.asarray",
                              "numpy.array", "jax.device_get", "item", "tolist",
                              "__array__", "__float__", "__int__", "__bool__", "__index__"})

"""What a backend declares and is given:
kept at this path for plugins written before the plugin API was one room;
the code lives in ``perfstack.plugin.backend``."""

from perfstack.plugin.backend import (
    Attachment as Attachment,
)
from perfstack.plugin.backend import (
    Availability as Availability,
)
from perfstack.plugin.backend import (
    Backend as Backend,
)
from perfstack.plugin.backend import (
    Collected as Collected,
)
from perfstack.plugin.backend import (
    ExtraRunner as ExtraRunner,
)
from perfstack.plugin.backend import (
    InProcessHook as InProcessHook,
)
from perfstack.plugin.backend import (
    Launch as Launch,
)
from perfstack.plugin.backend import (
    Option as Option,
)
from perfstack.plugin.backend import (
    Outcome as Outcome,
)
from perfstack.plugin.backend import (
    ReadyAttachment as ReadyAttachment,
)
from perfstack.plugin.backend import (
    Recorded as Recorded,
)
from perfstack.plugin.backend import (
    RunContext as RunContext,
)
from perfstack.plugin.backend import (
    StepWindow as StepWindow,
)
from perfstack.plugin.backend import (
    Workload as Workload,
)
from perfstack.plugin.backend import (
    availability as availability,
)

"""DP-FedAvg's adaptive clipping as Andrew et al. (2021) define it, on Flower's own wrappers (SPEC §9).

Flower 1.42's ``DifferentialPrivacy{Server,Client}SideAdaptiveClipping`` update the clipping norm with the fraction
of updates that were clipped, C <- C exp(-lr (clipped - gamma)), where Andrew et al.'s rule uses the fraction left
unclipped, C <- C exp(-lr (unclipped - gamma)): with every update above C, Flower's C shrinks further instead of
growing towards the gamma-quantile of the update norms. They also noise a round's average with the norm updated after
that round's clipping, not the norm that clipped it, so the noise is off by the update's factor. The subclasses here
change those two steps and nothing else: the clipping, the count's noise (as Andrew et al. calibrate it), the split
of z between the count and the updates, and the aggregation stay Flower's.
"""

from __future__ import annotations

import math

import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
)
from flwr.supercore.differential_privacy import add_gaussian_noise_inplace, compute_stdv


class AndrewNormUpdate:
    """Andrew et al.'s geometric update of the clipping norm, and the round's noise scaled by the norm that clipped
    it. Mixed in before a Flower adaptive-clipping wrapper."""

    round_clipping_norm: float  # the norm that clipped the round being aggregated
    round_noise_stddev: float | None = None  # the standard deviation of the noise that round's average received

    def _geometric_update(self, clipped_fraction: float) -> None:
        # Flower passes the noised fraction of clipped updates, (count + N(0, s)) / m; one minus it is the noised
        # fraction of unclipped ones (the same Gaussian, sign turned), the b-bar of Andrew et al.
        self.round_clipping_norm = self.clipping_norm
        unclipped = 1.0 - clipped_fraction
        self.clipping_norm *= math.exp(-self.clip_norm_lr * (unclipped - self.target_clipped_quantile))

    def _add_noise_to_aggregated_arrays(self, aggregated: ArrayRecord) -> ArrayRecord:
        arrays = aggregated.to_numpy_ndarrays()
        self.round_noise_stddev = compute_stdv(self.noise_multiplier, self.round_clipping_norm,
                                               self.num_sampled_clients)
        add_gaussian_noise_inplace(arrays, self.round_noise_stddev)
        return ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(aggregated.keys(), arrays, strict=True)})


class ServerSideAdaptiveClipping(AndrewNormUpdate, DifferentialPrivacyServerSideAdaptiveClipping):
    """Flower's server-side adaptive clipping with Andrew et al.'s norm update and the round's own norm in its
    noise."""


class ClientSideAdaptiveClipping(AndrewNormUpdate, DifferentialPrivacyClientSideAdaptiveClipping):
    """Flower's client-side adaptive clipping (``adaptiveclipping_mod`` on the clients) with Andrew et al.'s norm
    update and the round's own norm in its noise."""


# the Flower wrapper a defense names -> the one fedmem runs in its place
CORRECTED = {"DifferentialPrivacyServerSideAdaptiveClipping": ServerSideAdaptiveClipping,
             "DifferentialPrivacyClientSideAdaptiveClipping": ClientSideAdaptiveClipping}

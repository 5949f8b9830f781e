"""fedmem's Hydra config tree, installed as the package ``fedmem.conf`` so an installed fedmem finds it."""

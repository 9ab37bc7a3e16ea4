# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkrun recipes in: the recipe as sparkrun 0.4.2 reads it (``recipe.py``), its mapping to a serving profile and an
inventory (``mapping.py``), and the files the import writes (``files.py``). Controller only; no sparkrun import."""

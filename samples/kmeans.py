"""k-means (Lloyd's algorithm) on a small point cloud, iterated until no assignment changes.

`while changed and it < max_iter:` starts as Python (`changed = True`) and is staged from the
iteration where `changed` becomes traced: a `lax.while_loop` whose trip count depends on the
points. Inside it, a `for` over the clusters collects the new centroids in a list, and an `if` on
the traced size of a cluster keeps the old centroid of a cluster that lost all its points (a
`lax.cond`, since its other branch divides by the count).
"""

import jax
import jax.numpy as jnp

from samples.common import run


def assign(points, centroids):
    """The index of the nearest centroid of each point."""
    distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
    return jnp.argmin(distances, axis=1)


def kmeans(points, centroids, max_iter=20):
    """Lloyd iterations from `centroids`; returns the centroids, labels and iteration count."""
    labels = assign(points, centroids)
    changed = True
    it = 0
    while changed and it < max_iter:
        new_centroids = []
        for j in range(centroids.shape[0]):
            members = labels == j
            count = jnp.sum(members)
            if count > 0:
                centroid = jnp.sum(points * members[:, None], axis=0) / count
            else:
                centroid = centroids[j]  # an empty cluster keeps its old centroid
            new_centroids.append(centroid)
        centroids = jnp.stack(new_centroids)
        new_labels = assign(points, centroids)
        changed = jnp.any(new_labels != labels)
        labels = new_labels
        it += 1
    return centroids, labels, it


def blobs(key, centers, per_cluster=10, spread=0.6):
    """`per_cluster` points drawn around each of `centers`."""
    noise = spread * jax.random.normal(key, (centers.shape[0], per_cluster, centers.shape[1]))
    return (centers[:, None, :] + noise).reshape(-1, centers.shape[1])


def main():
    centers = jnp.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.7]])
    points = blobs(jax.random.PRNGKey(0), centers)
    # The third start is far from every point: its cluster stays empty and keeps it.
    start = jnp.array([[1.5, 1.5], [1.6, 1.4], [20.0, 20.0], [1.4, 1.6]])
    n, k = points.shape[0], start.shape[0]
    print(f"k-means of {n} points in 3 overlapping blobs, from {k} starts:")
    (centroids, labels, it), _ = run(kmeans, points, start)
    sizes = jnp.sum(labels[:, None] == jnp.arange(start.shape[0]), axis=0)
    print(f"  converged after {int(it)} iterations; cluster sizes {sizes.tolist()}")
    for j, c in enumerate(centroids.tolist()):
        print(f"  centroid {j}: ({c[0]:6.3f}, {c[1]:6.3f})")


if __name__ == "__main__":
    main()

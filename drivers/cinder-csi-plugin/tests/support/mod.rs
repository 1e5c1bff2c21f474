pub mod mini_cloud;
